"""`python3 -m streamrt` (and the `streamrt` command pip installs, which runs the same main):
--help, the version text, and `demo` / `bench` run by the streamrt tool built with the package."""

import os
import subprocess
import sys

import pytest

import streamrt
import streamrt.__main__ as cli


# The package under test, wherever the subprocess runs.
ENV = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(
    streamrt.__file__))))


def run(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "streamrt", *args], capture_output=True,
                          text=True, timeout=300, cwd=cwd, env=ENV)


def tool_or_skip():
    tool, why = cli._tool()
    if tool is None:
        pytest.skip(f"no streamrt tool with this package: {why}")
    return tool


def test_help_names_the_commands():
    r = run("--help")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("usage: python3 -m streamrt [command]")
    for command in ("demo", "bench", "--version"):
        assert command in r.stdout


def test_without_a_command_it_prints_the_version_text():
    r = run()
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(streamrt._streamrt._version_text())
    assert "library: " in r.stdout
    assert run("--version").stdout == r.stdout


def test_unknown_command_is_an_error_with_the_usage():
    r = run("demos")
    assert r.returncode == 2
    assert "unknown command 'demos'" in r.stderr
    assert "usage:" in r.stderr


def test_demo_runs_the_tool(tmp_path):
    tool_or_skip()
    r = run("demo", "--size", "64", "--iters", "1", "--small-size", "32", "--small-iters", "4",
            "--runs", "1", "--out", str(tmp_path), cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("streamrt demo:")
    assert "all checks passed" in r.stdout
    assert (tmp_path / "streamrt-timeline.svg").is_file()


def test_demo_options_go_to_the_tool():
    tool_or_skip()
    r = run("demo", "--help")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("usage: streamrt demo")
    bad = run("demo", "--runs", "0")
    assert bad.returncode == 2
    assert "--runs needs an integer" in bad.stderr


def test_bench_runs_the_tool():
    tool = tool_or_skip()
    r = run("bench", "--list", "--filter", "round_trip/streamrt$")
    if r.returncode == 2 and "not built in this configuration" in r.stderr:
        pytest.skip(f"{tool} was built without the benchmark peers")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["round_trip/streamrt"]


def test_the_tool_is_an_executable_file():
    tool = tool_or_skip()
    assert os.path.isfile(tool) and os.access(tool, os.X_OK)
