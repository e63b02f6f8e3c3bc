"""The type stubs (_streamrt.pyi, and _streamrt_mpi.pyi when MPI was found) describe the
extensions exactly: every public name and member of a module is in its stub, and everything in
the stub exists at run time."""

import ast
import importlib
import inspect
import pathlib

import pytest

import streamrt

PACKAGE = pathlib.Path(streamrt.__file__).parent


def extension(name):
    try:
        return importlib.import_module("streamrt." + name)
    except ImportError as e:
        if name == "_streamrt_mpi":
            pytest.skip(f"built without MPI: {e}")
        if name == "_streamrt_torch":
            pytest.skip(f"built without torch's C++ API (libtorch-dev): {e}")
        raise


EXTENSIONS = ["_streamrt", "_streamrt_mpi", "_streamrt_torch"]


def stub_tree(name):
    stub = PACKAGE / (name + ".pyi")
    return ast.parse(stub.read_text(), filename=str(stub))


def declared(body):
    names = set()
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


@pytest.mark.parametrize("name", EXTENSIONS)
def test_stub_files_are_shipped(name):
    extension(name)
    assert (PACKAGE / (name + ".pyi")).is_file()
    assert (PACKAGE / "py.typed").is_file()


@pytest.mark.parametrize("name", EXTENSIONS)
def test_module_names_match_the_stub(name):
    module = extension(name)
    stub = declared(stub_tree(name).body)
    runtime = {n for n in vars(module) if not n.startswith("__")}
    assert runtime - stub == set(), "missing from the stub"
    assert stub - runtime == set(), "in the stub but not in the module"


@pytest.mark.parametrize("name", EXTENSIONS)
def test_class_members_match_the_stub(name):
    module = extension(name)
    for node in stub_tree(name).body:
        if not isinstance(node, ast.ClassDef):
            continue
        cls = getattr(module, node.name)
        stub = declared(node.body)
        for member in stub:
            assert hasattr(cls, member), f"{node.name}.{member} is in the stub only"
        if issubclass(cls, BaseException):
            continue
        public = {n for n in vars(cls) if not n.startswith("_") and not n.startswith("pybind11")}
        missing = public - stub
        assert missing == set(), f"{node.name} members missing from the stub: {missing}"


def test_package_exports_everything_it_declares():
    for name in streamrt.__all__:
        assert hasattr(streamrt, name), name
    assert inspect.ismodule(streamrt.cpu)
