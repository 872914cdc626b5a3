"""What env functions return, and whether they can travel: checked where envs are built.

Every place that calls env functions (this process for ``SyncVecEnv`` and a
local block, a worker, a Ray actor) passes each result through :func:`checked`
before using it, so a function that returns ``None`` (or a tuple, a class...) is
an :class:`~fastvec.errors.EnvFnError` naming it, not an ``AttributeError`` from
deep inside; what was made before is closed with :func:`close_quietly`, whose
errors never hide the first one.  :func:`pickle_blocks` cloudpickles each
block's env functions for the workers or actors and, when one cannot be
pickled, says which, which object in it fails, and the usual fixes.
"""

from __future__ import annotations

import functools
import reprlib
import types
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import cloudpickle
import gymnasium as gym

from fastvec.errors import EnvFnError
from fastvec.pool.games import is_game

__all__ = ["checked", "close_quietly", "env_functions", "is_env", "make_envs", "pickle_blocks"]

EXPECTED = "expected a gymnasium.Env (or a PettingZoo game: ParallelEnv or AECEnv)"
FIXES = ("Build the object that cannot be pickled inside the env function, pass a "
         "module-level function or a functools.partial of one, or use SyncVecEnv, which "
         "never pickles")
_SHORT = reprlib.Repr()
_SHORT.maxstring = _SHORT.maxother = 60


def is_env(made: Any) -> bool:
    """Whether ``made`` can be stepped: a ``gymnasium.Env``, a PettingZoo game, or an
    object (not a class) with an env's ``reset``, ``step`` and ``action_space``.
    """
    if isinstance(made, gym.Env) or is_game(made):
        return True
    return (not isinstance(made, type) and callable(getattr(made, "reset", None))
            and callable(getattr(made, "step", None)) and hasattr(made, "action_space"))


def env_functions(env_fns: Any) -> list:
    """``env_fns`` as a list, once each item is known to be callable.

    Raises:
        EnvFnError: ``env_fns`` is not a sequence of callables (one function, an env
            already made, a module...); the message says what was expected.
    """
    if callable(env_fns) or isinstance(env_fns, (str, bytes)) or \
            not isinstance(env_fns, Iterable):
        raise EnvFnError(f"expected env_fns to be a list of functions that each make an "
                         f"env, got {_describe(env_fns)}; for n copies of one: [env_fn] * n")
    fns = list(env_fns)
    for index, env_fn in enumerate(fns):
        if not callable(env_fn):
            raise EnvFnError(f"env_fns[{index}] is {_describe(env_fn)}, not a function that "
                             f"makes an env{_hint(env_fn)}")
    return fns


def _describe(obj: Any) -> str:
    if isinstance(obj, types.ModuleType):
        return f"the module {obj.__name__}"
    return f"{_SHORT.repr(obj)} ({type(obj).__name__})"


def _hint(obj: Any) -> str:
    if isinstance(obj, types.ModuleType):
        return f" (a PettingZoo game's module: pass {obj.__name__.rsplit('.', 1)[-1]}.env " \
               "or .parallel_env)"
    if is_env(obj):
        return (f" (an env already made: pass a function that makes a new one each call, "
                f"e.g. {type(obj).__name__} or lambda: {type(obj).__name__}(...))")
    return ""


def checked(made: Any, index: int) -> Any:
    """``made``, what ``env_fns[index]`` returned, if it is an env (:func:`is_env`).

    Raises:
        EnvFnError: it is not; the message names ``env_fns[index]``, shows what it
            returned (shortened) and says what was expected.
    """
    if is_env(made):
        return made
    if isinstance(made, type):
        what = f"the class {made.__name__}, not an instance of it"
    else:
        what = f"{_SHORT.repr(made)} ({type(made).__name__})"
        if callable(made):
            what += ", a callable, not an env (return what it returns)"
    raise EnvFnError(f"env_fns[{index}] returned {what}; {EXPECTED}")


def close_quietly(envs: Sequence[Any]) -> None:
    """Close each of ``envs``; what a ``close`` raises is dropped (an error being raised
    already is the one to report).
    """
    for env in envs:
        try:
            env.close()
        except Exception:  # noqa: S110 - never hide the error that brought us here
            pass


def make_envs(env_fns: Sequence[Callable[[], Any]], first: int = 0) -> list:
    """Call every env function in order; each result :func:`checked` (``first``: the
    index of ``env_fns[0]`` in the vector env's).  If one raises or returns no env,
    the envs made are closed and the exception is raised.
    """
    envs: list = []
    try:
        for k, env_fn in enumerate(env_fns):
            envs.append(checked(env_fn(), first + k))
    except BaseException:
        close_quietly(envs)
        raise
    return envs


def pickle_blocks(env_fns: Sequence[Callable[[], Any]], bounds: Sequence[tuple[int, int]],
                  blocks: Sequence[int], where: str) -> dict[int, bytes]:
    """The env functions of each of ``blocks`` (``bounds[b] = (start, stop)``),
    cloudpickled for ``where`` (``"SubprocVecEnv's worker processes"``).

    Raises:
        EnvFnError: one cannot be pickled; the message names it and, where it can be
            found, the object in it that fails, and says how to fix it; the pickling
            error is its ``__cause__``.
    """
    payloads = {}
    for b in blocks:
        start, stop = bounds[b]
        try:
            payloads[b] = cloudpickle.dumps(list(env_fns[start:stop]))
        except Exception as exc:
            raise EnvFnError(_unpicklable(env_fns, start, stop, where, exc)) from exc
    return payloads


def _unpicklable(env_fns: Sequence[Any], start: int, stop: int, where: str,
                 exc: Exception) -> str:
    index = next((i for i in range(start, stop) if not _pickles(env_fns[i])), None)
    which = f"env_fns[{index}]" if index is not None else f"env_fns[{start}:{stop}]"
    path = None if index is None else _culprit(env_fns[index], 3)
    found = "" if not path else f" (the object that fails: {' > '.join(path)})"
    return (f"{which} cannot be pickled: {where} get their env functions by cloudpickle, "
            f"which raised {type(exc).__name__}: {exc}{found}. {FIXES}.")


def _pickles(obj: Any) -> bool:
    try:
        cloudpickle.dumps(obj)
    except Exception:
        return False
    return True


def _culprit(obj: Any, depth: int) -> list[str] | None:
    """Where in ``obj`` the unpicklable object sits: the parts leading to it, outermost
    first, the last with its type; None if no part of ``obj`` fails alone.
    """
    for name, part in _parts(obj):
        if _pickles(part):
            continue
        deeper = _culprit(part, depth - 1) if depth > 1 else None
        return [name, *deeper] if deeper else [f"{name}, a {_type_name(part)}"]
    return None


def _type_name(obj: Any) -> str:
    kind = type(obj)
    module = "" if kind.__module__ == "builtins" else f"{kind.__module__}."
    return f"{module}{kind.__qualname__}"


def _parts(obj: Any) -> Iterator[tuple[str, Any]]:
    """What pickling ``obj`` by value pickles: a function's closure, globals and
    defaults, a partial's function and arguments, a method's object, attributes.
    """
    if isinstance(obj, functools.partial):
        yield "the partial's function", obj.func
        yield from ((f"the partial's argument {k}", a) for k, a in enumerate(obj.args))
        yield from ((f"the partial's keyword {key!r}", v) for key, v in obj.keywords.items())
    elif isinstance(obj, types.MethodType):
        yield "the object it is a method of", obj.__self__
    elif isinstance(obj, types.FunctionType):
        code = obj.__code__
        for name, cell in zip(code.co_freevars, obj.__closure__ or (), strict=False):
            try:
                yield f"the variable {name!r} it closes over", cell.cell_contents
            except ValueError:  # an empty cell
                continue
        for name in _global_names(code):
            if name in obj.__globals__:
                yield f"the global {name!r} it uses", obj.__globals__[name]
        yield from (("a default argument", v) for v in obj.__defaults__ or ())
        yield from ((f"the default of {k!r}", v) for k, v in (obj.__kwdefaults__ or {}).items())
    else:
        attributes = getattr(obj, "__dict__", {})
        yield from ((f"the attribute {key!r}", v) for key, v in attributes.items())


def _global_names(code: types.CodeType) -> list[str]:
    """The global names ``code`` and the functions defined in it refer to."""
    names = list(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names += _global_names(const)
    return list(dict.fromkeys(names))
