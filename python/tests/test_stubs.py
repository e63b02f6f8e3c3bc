"""The type stubs (_streamrt.pyi) describe the extension exactly: every public name and member
of the module is in the stub, and everything in the stub exists at run time."""

import ast
import inspect
import pathlib

import streamrt
from streamrt import _streamrt

STUB = pathlib.Path(streamrt.__file__).with_name("_streamrt.pyi")


def stub_tree():
    return ast.parse(STUB.read_text(), filename=str(STUB))


def declared(body):
    names = set()
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def test_stub_files_are_shipped():
    assert STUB.is_file()
    assert STUB.with_name("py.typed").is_file()


def test_module_names_match_the_stub():
    stub = declared(stub_tree().body)
    runtime = {n for n in vars(_streamrt) if not n.startswith("__")}
    assert runtime - stub == set(), "missing from the stub"
    assert stub - runtime == set(), "in the stub but not in the module"


def test_class_members_match_the_stub():
    for node in stub_tree().body:
        if not isinstance(node, ast.ClassDef):
            continue
        cls = getattr(_streamrt, node.name)
        stub = declared(node.body)
        for name in stub:
            assert hasattr(cls, name), f"{node.name}.{name} is in the stub only"
        if issubclass(cls, BaseException):
            continue
        public = {n for n in vars(cls) if not n.startswith("_") and not n.startswith("pybind11")}
        missing = public - stub
        assert missing == set(), f"{node.name} members missing from the stub: {missing}"


def test_package_exports_everything_it_declares():
    for name in streamrt.__all__:
        assert hasattr(streamrt, name), name
    assert inspect.ismodule(streamrt.cpu)
