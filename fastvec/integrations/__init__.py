"""Adapters that plug fastvec vector envs into other RL libraries (optional extras)."""
