"""``fastvec.errors``: one root, and Gymnasium's own classes where code catches them."""

from __future__ import annotations

import pytest
from gymnasium.error import AlreadyPendingCallError, ClosedEnvironmentError, NoAsyncCallError

pytestmark = pytest.mark.fastvec_only


def test_error_classes_are_gymnasiums(impl):
    errors = impl.errors
    assert errors.NoAsyncCallError is NoAsyncCallError
    assert errors.AlreadyPendingCallError is AlreadyPendingCallError
    assert issubclass(errors.ClosedEnvError, ClosedEnvironmentError)
    assert issubclass(errors.ClosedEnvError, errors.FastVecError)
    assert issubclass(errors.ObjectSpaceWarning, Warning)
