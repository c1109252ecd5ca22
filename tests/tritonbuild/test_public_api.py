"""The public surface of tritonbuild is explicit and stays that way."""
import inspect

import tritonbuild
from tritonbuild import errors


def test_all_is_exactly_the_public_names():
    public = {n for n in vars(tritonbuild) if not n.startswith("_")
              and not inspect.ismodule(getattr(tritonbuild, n))}
    assert set(tritonbuild.__all__) == public


def test_every_error_is_exported_and_in_the_tree():
    classes = {n for n, c in vars(errors).items()
               if inspect.isclass(c) and issubclass(c, Exception) and c.__module__ == errors.__name__}
    assert classes == set(errors.__all__) <= set(tritonbuild.__all__)
    for name in classes:  # the docstring draws every class of the hierarchy
        assert name in errors.__doc__


def test_validation_errors_exit_2():
    assert errors.ValidationError("--x", "y", "z").exit_code == 2
    assert str(errors.UsageError("unrecognized arguments: --q")).startswith("unrecognized")
