"""The step loop over a block of multi-agent games: one row per seat of each game.

A :class:`GameStepper` is the per-game counterpart of ``stepping.EnvStepper``
(both subclass ``stepping.Stepper``), with the same interface (``step``,
``reset``, ``set_rows``, ``current``), so a block of games sits wherever a block
of envs does.  Game *g* of the block owns rows
``g * seats .. (g + 1) * seats - 1``, one per agent of ``agents`` (its
``possible_agents``).  A step gathers the actions of the rows whose agents act,
steps the game (through the parallel-style adapter of ``fastvec.pool.games``),
scatters each agent's observation, reward and flags into its row, zero-fills the
rows of agents not in the game, and sets the ``alive`` / ``active`` bytes.  A
game is over when no agent is left; it then auto-resets as a whole, per mode
(see docs/multiagent.md).  Info entries are returned as ``EnvStepper`` returns them.
"""

from libc.string cimport memset

cimport numpy as cnp

from fastvec._kernels.flatten cimport FieldTable
from fastvec._kernels.stacking cimport store_step
from fastvec._kernels.stepping cimport NEXT_STEP, SAME_STEP, Stepper, check_mask

from fastvec.errors import WorkerError

cnp.import_array()


cdef class GameStepper(Stepper):
    """A block of games and the batch buffers their rows go into."""

    cdef list games  # the parallel-style adapters of envs, the games as built
    cdef readonly tuple agents
    cdef dict seat_of
    cdef readonly Py_ssize_t seats
    cdef object zero_obs
    cdef cnp.npy_bool[::1] alive, active

    def __init__(self, list envs, list games, tuple agents, int mode, FieldTable table, rows,
                 list obs_objects, object zero_obs, double[::1] rewards,
                 cnp.npy_bool[::1] terminations, cnp.npy_bool[::1] truncations,
                 cnp.npy_bool[::1] needs_reset, cnp.npy_bool[::1] alive,
                 cnp.npy_bool[::1] active, Py_ssize_t first_index=0):
        cdef Py_ssize_t n = len(envs) * len(agents)
        cdef str counted = f" ({len(envs)} games of {len(agents)} seats)"
        if len(games) != len(envs) or not agents:
            raise ValueError("expected one adapter per game and at least one agent")
        self._set_buffers(envs, n, mode, table, rows, obs_objects, rewards, terminations,
                          truncations, needs_reset, first_index, counted)
        if not (alive.shape[0] == active.shape[0] == n):
            raise ValueError(f"expected reward and flag arrays of length {n}{counted}")
        self.games, self.agents = games, agents
        self.seat_of = {agent: seat for seat, agent in enumerate(agents)}
        self.seats = len(agents)
        self.zero_obs = zero_obs
        self.alive, self.active = alive, active

    cdef int _store_obs(self, Py_ssize_t i, object obs) except -1:
        if self.table is None:
            self.obs_objects[i] = obs
        else:
            self.table.write(obs, <char*>&self.rows[i, 0], self.first_index + i)
        return 0

    cdef int _clear_obs(self, Py_ssize_t i) except -1:
        if self.table is None:
            self.obs_objects[i] = self.zero_obs
        else:
            memset(&self.rows[i, 0], 0, self.rows.shape[1])
        return 0

    cdef int _check_agents(self, Py_ssize_t g, object obs, Py_ssize_t found) except -1:
        """Raise if ``obs`` names an agent that is not one of the seats."""
        if found == len(obs):
            return 0
        unknown = [agent for agent in obs if agent not in self.seat_of]
        game = (self.first_index // self.seats) + g
        raise WorkerError(f"game {game} reported agent {unknown[0]!r}, which is not one of "
                          f"its possible_agents {list(self.agents)}", env_index=game)

    cdef int _mark_active(self, Py_ssize_t base, object game) except -1:
        cdef Py_ssize_t s
        cdef object active = game.active()
        if active is None:
            for s in range(self.seats):
                self.active[base + s] = self.alive[base + s]
        else:
            for s in range(self.seats):
                self.active[base + s] = False
            for agent in active:
                self.active[base + <Py_ssize_t>self.seat_of[agent]] = True
        return 0

    cdef int _write_reset(self, Py_ssize_t g, object obs, object infos, list entries) except -1:
        """Rows of game ``g`` after a reset: its observations, reward 0, flags False."""
        cdef Py_ssize_t s, i, base = g * self.seats, found = 0
        for s in range(self.seats):
            i = base + s
            agent = self.agents[s]
            value = obs.get(agent, self) if obs else self
            if value is self:
                self._clear_obs(i)
                self.alive[i] = False
            else:
                self._store_obs(i, value)
                self.alive[i] = True
                found += 1
                info = infos.get(agent) if infos else None
                if info:
                    entries.append((self.first_index + i, info))
            self.rewards[i] = 0.0
            self.terminations[i] = False
            self.truncations[i] = False
            self.needs_reset[i] = False
        self._check_agents(g, obs, found)
        self._mark_active(base, self.games[g])
        return 0

    def step(self, list actions, object mask=None):
        """Step every game once with its rows' actions; return the non-empty info entries.

        ``needs_reset`` of a game's rows is read (``NEXT_STEP``: reset the game instead
        of stepping it) and then set to whether the game ended on this step.  With
        ``mask`` (bools, one per row) only the games whose first row it selects are
        stepped; the others' rows are left as they are.
        """
        cdef Py_ssize_t g, s, i, base, found, n = len(self.envs) * self.seats
        cdef list entries = []
        cdef object obs, rewards, terminations, truncations, infos
        cdef dict acting
        cdef list step_entries
        cdef bint over
        cdef const cnp.npy_bool[::1] some = check_mask(mask, n)
        if len(actions) != n:
            raise ValueError(f"expected {n} actions, got {len(actions)}")
        for g in range(len(self.games)):
            base = g * self.seats
            if some is not None and not some[base]:
                continue
            self.current = base
            game = self.games[g]
            if self.mode == NEXT_STEP and self.needs_reset[base]:
                obs, infos = game.reset()
                self._write_reset(g, obs, infos, entries)
                continue
            acting = {}
            for agent in game.acting():
                seat = self.seat_of.get(agent)
                if seat is None:
                    self._check_agents(g, {agent: None}, 0)
                acting[agent] = actions[base + <Py_ssize_t>seat]
            obs, rewards, terminations, truncations, infos = game.step(acting)
            over = not game.agents
            # SAME_STEP resets an ended game now: its rows carry the reset's infos, and
            # this step's only in final_info (as Gymnasium's SAME_STEP for one env)
            step_entries = None if over and self.mode == SAME_STEP else entries
            found = 0
            for s in range(self.seats):
                i = base + s
                agent = self.agents[s]
                value = obs.get(agent, self)
                if value is self:
                    self._clear_obs(i)
                    self.rewards[i] = 0.0
                    self.terminations[i] = False
                    self.truncations[i] = False
                    self.alive[i] = False
                    continue
                found += 1
                self._store_obs(i, value)
                store_step(rewards.get(agent, 0.0), terminations.get(agent, False),
                           truncations.get(agent, False), &self.rewards[0],
                           &self.terminations[0], &self.truncations[0], i)
                self.alive[i] = True
                info = infos.get(agent)
                if info and step_entries is not None:
                    step_entries.append((self.first_index + i, info))
            self._check_agents(g, obs, found)
            self._mark_active(base, game)
            if step_entries is None:
                for s in range(self.seats):
                    agent = self.agents[s]
                    entries.append((self.first_index + base + s, {
                        "final_obs": obs.get(agent, self.zero_obs),
                        "final_info": infos.get(agent) or {}}))
                obs, infos = game.reset()
                self._write_reset_keep_results(g, obs, infos, entries)
                over = False
            for s in range(self.seats):
                self.needs_reset[base + s] = over
        return entries

    cdef int _write_reset_keep_results(self, Py_ssize_t g, object obs, object infos,
                                       list entries) except -1:
        """``SAME_STEP``: a reset's observations, keeping this step's rewards and flags."""
        cdef Py_ssize_t s, i, base = g * self.seats
        saved = [(self.rewards[base + s], self.terminations[base + s],
                  self.truncations[base + s]) for s in range(self.seats)]
        self._write_reset(g, obs, infos, entries)
        for s in range(self.seats):
            i = base + s
            self.rewards[i], self.terminations[i], self.truncations[i] = saved[s]
        return 0

    def reset(self, list seeds, object options, object mask=None):
        """Reset the games (those whose first row ``mask`` selects, if given).

        ``seeds`` has one entry per row; a game is seeded with its first row's.
        Writes observations like :meth:`step`, clears the flags of the rows it
        resets, and returns the non-empty info entries.
        """
        cdef Py_ssize_t g, base, n = len(self.envs) * self.seats
        cdef list entries = []
        if len(seeds) != n or (mask is not None and len(mask) != n):
            raise ValueError(f"expected {n} seeds and mask entries")
        for g in range(len(self.games)):
            base = g * self.seats
            if mask is not None and not mask[base]:
                continue
            self.current = base
            obs, infos = self.games[g].reset(seed=seeds[base], options=options)
            self._write_reset(g, obs, infos, entries)
        return entries
