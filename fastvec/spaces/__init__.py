"""A space as bytes and as checks: the flat record layout of an observation space
(:mod:`~fastvec.spaces.layout`), the checks of an action batch
(:mod:`~fastvec.spaces.actions`) and Gymnasium's ``observation_mode``
(:mod:`~fastvec.spaces.observation_mode`).
"""
