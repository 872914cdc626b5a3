"""A zoo of small environments for the vector-env tests, in one place to import from.

Every env here is a module-level class, so an env factory such as
``functools.partial(CountingEnv, episode_len=3)`` pickles and can be sent to a
worker process.  Where the logic is more than a line, it lives in a plain
function of the env's state so that a test can compute the expected result
without an env.

Envs take an ``env_id`` (their index in the vector env) so that a value landing
in the wrong env's slot shows up.  Use :func:`make_fns` to build the list of
factories.  The envs live in :mod:`tests.support.counting`,
:mod:`tests.support.synthetic` and :mod:`tests.support.faulty`.
"""

from __future__ import annotations

from tests.support.counting import (  # noqa: F401
    ActionEchoEnv,
    AnyActionEnv,
    CountingEnv,
    DictCountingEnv,
    PaddedObsEnv,
    RenderEnv,
    counting_model,
    counting_step,
    gym_fns,
    make_fns,
    render_frame,
)
from tests.support.faulty import (  # noqa: F401
    BAD_OBS_PATH,
    CHAOS_DIE,
    CHAOS_RAISE,
    CHAOS_SLOW,
    BadObsEnv,
    ChaosEnv,
    CrashingEnv,
    EnvBoom,
    HangingEnv,
    ProbeEnv,
    RaisingEnv,
    SlowEnv,
    bad_obs_space,
    crashing_fns,
)
from tests.support.synthetic import (  # noqa: F401
    FuzzEnv,
    JitterEnv,
    ObjectSpaceEnv,
    SyntheticEnv,
    fuzz_info,
    mixed_type_info,
    object_space,
    rich_info,
    sampler,
    synthetic_action_space,
    synthetic_observation_space,
)

__all__ = [
    "ActionEchoEnv",
    "AnyActionEnv",
    "BAD_OBS_PATH",
    "CHAOS_DIE",
    "CHAOS_RAISE",
    "CHAOS_SLOW",
    "BadObsEnv",
    "ChaosEnv",
    "CountingEnv",
    "CrashingEnv",
    "DictCountingEnv",
    "EnvBoom",
    "FuzzEnv",
    "HangingEnv",
    "JitterEnv",
    "ObjectSpaceEnv",
    "PaddedObsEnv",
    "ProbeEnv",
    "RaisingEnv",
    "RenderEnv",
    "SlowEnv",
    "SyntheticEnv",
    "bad_obs_space",
    "counting_model",
    "counting_step",
    "crashing_fns",
    "fuzz_info",
    "gym_fns",
    "make_fns",
    "mixed_type_info",
    "object_space",
    "render_frame",
    "rich_info",
    "sampler",
    "synthetic_action_space",
    "synthetic_observation_space",
]
