"""Exact dynamic programming over monotone merges of two speakers' line lists onto label positions
(the readings and their scores: `psyattrs.align.lattice`).

`forward_backward` computes the log of the sum of exp(score) over all paths (the marginal
likelihood) and the posterior probability of every (label, unit) pair; `viterbi` the best path.
Both are exact over the lattice: no pruning, no band. The state after t labels is (i, x, s):
i persona items used, x = i + j - t (j user items used; so j is implied) and the last state s.
x only grows with multi-line units and skipped blanks and only shrinks with phantoms, so it lives
in [-max_phantoms, m + n - T + max_phantoms]; a conversation whose lines add up to its labels has
a single x value and the lattice is T x m. The loops run over t; each step is vectorised with
numpy over (i, x). Forward-backward works with probabilities rescaled per label (the log of the
scale is accumulated), Viterbi with log-scores.
"""

from __future__ import annotations

import numpy as np

from psyattrs.align.lattice import N_STATES, PAUSE, PERSONA, PHANTOM, USER, Lattice, Path, Posteriors, Step

_NEG = -np.inf


class _Kernel:
    """Emission arrays of a lattice laid out for the passes, computed once per lattice."""

    def __init__(self, lat: Lattice):
        self.lat = lat
        T, m, n = lat.T, lat.m, lat.n
        self.K = lat.max_k
        self.D = lat.n_x
        ep = lat.emit_persona[:, :, : self.K]
        eu = lat.emit_user[:, :, : self.K]
        self.blank_items = np.flatnonzero(lat.persona_blank)
        self.use_pause = bool(len(self.blank_items)) and lat.log_keep > _NEG
        # a skip moves (i, x) to (i + 1, x + 1): impossible with one x value (lines and labels
        # add up, the common case), where the closure's loop over blank items would do nothing
        self.use_skip = bool(len(self.blank_items)) and lat.log_skip > _NEG and self.D > 1
        self.use_phantom = lat.max_phantoms > 0
        # persona emissions padded with a row for i = m; user emissions gathered on the (i, x)
        # grid of every label: j = t + x - i, out-of-range j pointing at a -inf row
        self.log_p = np.concatenate([ep, np.full((T, 1, self.K), _NEG)], axis=1)  # (T, m+1, K)
        eu_pad = np.full((T, n + 2, self.K), _NEG)
        eu_pad[:, 1 : n + 1] = eu
        i = np.arange(m + 1)[None, :, None]
        x = lat.x_lo + np.arange(self.D)[None, None, :]
        t = np.arange(T)[:, None, None]
        self.j_index = np.clip(t + x - i, -1, n) + 1  # (T, m+1, D)
        self.log_u_pad = eu_pad  # (T, n+2, K); at label t, log_u_pad[t][j_index[t]] is (m+1, D, K)
        scale = np.full(T, _NEG)
        for arr in (ep.reshape(T, m * self.K), eu.reshape(T, n * self.K)):
            if arr.shape[1]:
                scale = np.maximum(scale, arr.max(axis=1))
        if self.use_pause or self.use_phantom:
            scale = np.maximum(scale, lat.emit_pause + max(lat.log_keep if self.use_pause else _NEG,
                                                          lat.log_phantom if self.use_phantom else _NEG))
        self.scale = np.where(np.isfinite(scale), scale, 0.0)
        self.trans = np.exp(lat.log_trans)
        diag = np.arange(N_STATES)
        self.trans_diag = self.trans[:, diag, diag]  # (T, 3): s -> s
        self.trans_off = self.trans.copy()  # (T, 3, 3): s -> s' != s
        self.trans_off[:, diag, diag] = 0.0
        self.start = np.exp(lat.log_start)
        # run scores: persona by i (m+1, 2), user by padded j (n+2, 2; row 0 is j < 0, unreachable)
        self.has_cross = lat.persona_user is not None or lat.user_persona is not None
        self.has_run = lat.persona_run is not None or lat.user_run is not None or self.has_cross
        if self.has_run:
            self.log_run_p = lat.persona_run if lat.persona_run is not None else np.zeros((m + 1, 2))
            self.log_run_u = np.zeros((n + 2, 2))
            if lat.user_run is not None:
                self.log_run_u[1:] = lat.user_run
            self.run_p, self.run_u = np.exp(self.log_run_p), np.exp(self.log_run_u)
        if self.has_cross:  # speaker-change pair scores on the (i, x) grid of every label: (T, m+1, D)
            rows = np.arange(m + 1)[None, :, None]
            grids = []
            for arr in (lat.persona_user, lat.user_persona):
                pad = np.zeros((m + 1, n + 2))
                if arr is not None:
                    pad[:, 1:] = arr
                grids.append(pad[rows, self.j_index])
            self.log_pu, self.log_up = grids
            self.pu1, self.up1 = np.expm1(self.log_pu), np.expm1(self.log_up)  # factor - 1: corrections
        self.log_end = lat.log_end if lat.log_end is not None else np.zeros(N_STATES)
        self.end = np.exp(self.log_end)
        self.skip_w = np.exp(lat.log_skip) if self.use_skip else 0.0
        self._w: tuple | None = None

    def weights(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Scaled emission probabilities of every label: persona (T, m+1, K), user padded
        (T, n+2, K; see `user`), pause on a blank item (T,), phantom pause (T,)."""
        if self._w is None:
            c = self.scale
            z = self.lat.emit_pause - c
            keep = np.exp(z + self.lat.log_keep) if self.use_pause else np.zeros(len(c))
            phantom = np.exp(z + self.lat.log_phantom) if self.use_phantom else np.zeros(len(c))
            self._w = (np.exp(self.log_p - c[:, None, None]), np.exp(self.log_u_pad - c[:, None, None]), keep, phantom)
        return self._w

    def user(self, table: np.ndarray, t: int) -> np.ndarray:
        """User emissions of label t on the (i, x) grid, (m+1, D, K), from a padded (T, n+2, K) table."""
        return table[t][self.j_index[t]]

    # -- run scores (stay / leave a speaker's run) on the (i, x) grid ------------------------

    def _run_grid(self, col: int, log: bool, scale: np.ndarray | None = None) -> np.ndarray:
        """Column `col` (0 stay, 1 leave) of the run scores of the state before each label, by
        that state's last state: (T, m+1, D, 3); the pause entry neutral (0 in log, 1 otherwise).
        `scale` (T, 3) multiplies each label's factors by last state."""
        p, u = (self.log_run_p, self.log_run_u) if log else (self.run_p, self.run_u)
        g = np.empty(self.j_index.shape + (N_STATES,))
        if scale is None:
            g[..., PERSONA] = p[:, col, None]
            g[..., USER] = u[self.j_index, col]
            g[..., PAUSE] = 0.0 if log else 1.0
        else:
            g[..., PERSONA] = p[None, :, col, None] * scale[:, None, None, PERSONA]
            g[..., USER] = u[self.j_index, col] * scale[:, None, None, USER]
            g[..., PAUSE] = scale[:, None, None, PAUSE]
        return g

    def run_grids(self, log: bool = False) -> tuple[np.ndarray, np.ndarray] | None:
        """The stay and leave factors at the state before every label, (T, m+1, D, 3) each, or
        None when the lattice has no run scores. Probabilities (exp of the scores; the stay factor
        times P(s -> s), the only transition it goes with) or, when `log`, the scores themselves.
        Built once per pass (not cached: twice the size of a forward layer stack)."""
        if not self.has_run:
            return None
        if log:
            return self._run_grid(0, True), self._run_grid(1, True)
        return self._run_grid(0, False, self.trans_diag), self._run_grid(1, False)

    def run_column(self, run: tuple[np.ndarray, np.ndarray], t: int, i: int, xi: int, to: int) -> np.ndarray:
        """The run score of each last state s at state (i, xi) before label t for the step s -> to."""
        stay, leave = run[0][t, i, xi], run[1][t, i, xi]
        col = np.where(np.arange(N_STATES) == to, stay, leave)
        if self.has_cross and to == USER:
            col[PERSONA] += self.log_pu[t, i, xi]
        elif self.has_cross and to == PERSONA:
            col[USER] += self.log_up[t, i, xi]
        return col

    def mix(self, a: np.ndarray, t: int, run: tuple[np.ndarray, np.ndarray] | None) -> np.ndarray:
        """M[i, x, s'] = sum_s a[i, x, s] P(s' | s) * run factor, for the step into label t >= 1."""
        if run is None:
            return a @ self.trans[t]
        stay_d, leave = run[0][t], run[1][t]
        al = a * leave
        off = (al.reshape(-1, N_STATES) @ self.trans_off[t]).reshape(a.shape)
        if self.has_cross:
            off[..., USER] += al[..., PERSONA] * self.trans_off[t, PERSONA, USER] * self.pu1[t]
            off[..., PERSONA] += al[..., USER] * self.trans_off[t, USER, PERSONA] * self.up1[t]
        return off + a * stay_d

    def mix_t(self, g: np.ndarray, t: int, run: tuple[np.ndarray, np.ndarray] | None) -> np.ndarray:
        """The transpose of `mix`: B[i, x, s] = sum_s' P(s' | s) * run factor * g[i, x, s']."""
        if run is None:
            return g @ self.trans[t].T
        stay_d, leave = run[0][t], run[1][t]
        off = (np.ascontiguousarray(g).reshape(-1, N_STATES) @ self.trans_off[t].T).reshape(g.shape)
        if self.has_cross:
            off[..., PERSONA] += self.trans_off[t, PERSONA, USER] * self.pu1[t] * g[..., USER]
            off[..., USER] += self.trans_off[t, USER, PERSONA] * self.up1[t] * g[..., PERSONA]
        return leave * off + stay_d * g

    # -- skip closure (blank items skipped inside one label layer) ---------------------------

    def skip(self, a: np.ndarray) -> np.ndarray:
        if self.use_skip:
            for b in self.blank_items:
                a[b + 1, 1:] += a[b, :-1] * self.skip_w
        return a

    def skip_t(self, a: np.ndarray) -> np.ndarray:
        if self.use_skip:
            for b in self.blank_items[::-1]:
                a[b, :-1] += a[b + 1, 1:] * self.skip_w
        return a


class _Shifts:
    """Buffers and strided views that handle every unit length k = 1..K in one numpy call.

    A persona unit of k items moves a state from (i, x) to (i + k, x + k - 1), a user unit from
    (i, x) to (i, x + k - 1). Written into a padded buffer, the sources of every target for every
    k form a strided view of shape (m+1, D, K) (`to_persona`, `to_user`); likewise the targets
    of every source (`from_persona`, `from_user`). Padding holds `fill` (0 for sums, -inf for
    maxima), so lengths that run off the lattice contribute nothing.
    """

    def __init__(self, m: int, D: int, K: int, fill: float):
        from numpy.lib.stride_tricks import as_strided

        self.K = K
        self.src_p = np.full((m + 1 + K, D + K - 1, K), fill)  # [i + K, x + K - 1, k - 1] = source (i, x)
        s0, s1, s2 = self.src_p.strides
        self.to_persona = as_strided(self.src_p[K - 1 :, K - 1 :], shape=(m + 1, D, K), strides=(s0, s1, s2 - s0 - s1))
        self.src_u = np.full((m + 1, D + K - 1, K), fill)  # [i, x + K - 1, k - 1] = source (i, x)
        u0, u1, u2 = self.src_u.strides
        self.to_user = as_strided(self.src_u[:, K - 1 :], shape=(m + 1, D, K), strides=(u0, u1, u2 - u1))
        self.dst_p = np.full((m + 1 + K, D + K - 1), fill)  # [i, x] = target (i, x)
        b0, b1 = self.dst_p.strides
        self.from_persona = as_strided(self.dst_p[1:], shape=(m + 1, D, K), strides=(b0, b1, b0 + b1))
        self.dst_u = np.full((m + 1, D + K - 1), fill)
        c0, c1 = self.dst_u.strides
        self.from_user = as_strided(self.dst_u, shape=(m + 1, D, K), strides=(c0, c1, c1))
        self.m, self.D = m, D

    def sources(self, persona: np.ndarray, user: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Views (m+1, D, K) of what reaches each target by each length, from per-source arrays
        persona (m+1, D, K) and user (m+1, D, K) (index k - 1 = the unit's length k)."""
        K = self.K
        self.src_p[K:, K - 1 :] = persona
        self.src_u[:, K - 1 :] = user
        return self.to_persona, self.to_user

    def targets(self, persona: np.ndarray, user: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Views (m+1, D, K) of the target values each source reaches by each length, from
        per-target arrays persona (m+1, D) and user (m+1, D)."""
        self.dst_p[: self.m + 1, : self.D] = persona
        self.dst_u[:, : self.D] = user
        return self.from_persona, self.from_user


def _initial(ker: _Kernel) -> np.ndarray:
    a0 = np.zeros((ker.lat.m + 1, ker.D))
    a0[0, -ker.lat.x_lo] = 1.0
    return ker.skip(a0)


def _to_states(ker: _Kernel, a: np.ndarray, t: int, a0: np.ndarray, run) -> np.ndarray:
    """M[i, x, s'] = sum_s A[i, x, s] P(s' | s) (times the run factors); the first label uses the
    start distribution."""
    if t == 0:
        return a0[:, :, None] * ker.start[None, None, :]
    return ker.mix(a, t, run)


def _forward(lat: Lattice, ker: _Kernel, keep: bool, run=None) -> tuple[float, np.ndarray | None, np.ndarray]:
    """Scaled forward pass: (loglik, the post-skip layers (T+1, m+1, D, 3) when `keep`, a0).
    `run`: the kernel's `run_grids()` when the caller has them already."""
    T, m = lat.T, lat.m
    K, D = ker.K, ker.D
    a0 = _initial(ker)
    A = np.zeros((T + 1, m + 1, D, N_STATES)) if keep else None
    log_scale = 0.0
    a = None
    blank = lat.persona_blank.astype(float)
    WP, WU, KEEP, PHANTOM_W = ker.weights()
    shifts = _Shifts(m, D, K, 0.0)
    if run is None:
        run = ker.run_grids()
    for t in range(T):
        M = _to_states(ker, a, t, a0, run)
        wp, wu, keep_w, phantom, c = WP[t], ker.user(WU, t), KEEP[t], PHANTOM_W[t], ker.scale[t]
        new = np.zeros((m + 1, D, N_STATES))
        to_p, to_u = shifts.sources(M[:, :, PERSONA, None] * wp[:, None, :], M[:, :, USER, None] * wu)
        if K == 1:  # one unit length: its term is the sum (a sum over an axis of one is slow)
            new[:, :, PERSONA] = to_p[:, :, 0]
            new[:, :, USER] = to_u[:, :, 0]
        else:
            new[:, :, PERSONA] = to_p.sum(axis=2)
            new[:, :, USER] = to_u.sum(axis=2)
        if ker.use_pause:
            new[1:, :, PAUSE] += M[:-1, :, PAUSE] * (blank * keep_w)[:, None]
        if ker.use_phantom:
            new[:, :-1, PAUSE] += M[:, 1:, PAUSE] * phantom
        ker.skip(new)
        z = new.sum()
        if not z > 0:
            return _NEG, A, a0
        a = new / z
        if keep:
            A[t + 1] = a
        log_scale += np.log(z) + c
    end = (a[m, lat.x_final - lat.x_lo] * ker.end).sum()
    if not end > 0:
        return _NEG, A, a0
    return float(log_scale + np.log(end)), A, a0


def _kernel(lat: Lattice) -> _Kernel:
    if "kernel" not in lat._cache:
        lat._cache["kernel"] = _Kernel(lat)
    return lat._cache["kernel"]


def _forward_cached(lat: Lattice, run=None) -> tuple[float, np.ndarray | None, np.ndarray]:
    if "forward" not in lat._cache:
        lat._cache["forward"] = _forward(lat, _kernel(lat), keep=True, run=run)
    return lat._cache["forward"]


def log_likelihood(lat: Lattice) -> float:
    """log of the summed exp(score) over all paths (-inf when there is none): the forward pass only."""
    if not lat.feasible:
        return _NEG
    if lat.T == 0:
        return _empty_score(lat)
    return _forward_cached(lat)[0]


def forward_backward(lat: Lattice) -> Posteriors:
    """Marginal log-likelihood and exact posteriors of every (label, unit) pair.

    Args:
        lat: the scored lattice of one conversation.

    Returns:
        `Posteriors`; when no path exists, loglik is -inf and every posterior is 0.
    """
    T, m, n = lat.T, lat.m, lat.n
    K_full = lat.emit_persona.shape[2]
    post = Posteriors(
        loglik=_NEG,
        persona=np.zeros((T, m, K_full)),
        user=np.zeros((T, n, K_full)),
        pause=np.zeros((T, m)),
        phantom=np.zeros(T),
        transitions=np.zeros((T, N_STATES, N_STATES)),
        persona_run=np.zeros((m + 1, 2)),
        user_run=np.zeros((n + 1, 2)),
        persona_user=np.zeros((m + 1, n + 1)),
        user_persona=np.zeros((m + 1, n + 1)),
        persona_at=np.zeros((m + 1, n + 1)),
        user_at=np.zeros((m + 1, n + 1)),
    )
    if not lat.feasible:
        return post
    if T == 0:
        post.loglik = _empty_score(lat)
        return post
    ker = _kernel(lat)
    K, D = ker.K, ker.D
    run = ker.run_grids()  # None without run scores; shared by the three passes
    loglik, A, a0 = _forward_cached(lat, run)
    if loglik == _NEG:
        return post
    post.loglik = loglik
    xf = lat.x_final - lat.x_lo

    # backward pass: only the messages (BN: pre-skip layer t+1, G: what each state of M_t leads to)
    WP, WU, KEEP, PHANTOM_W = ker.weights()
    blank = lat.persona_blank.astype(float)
    BNs = np.zeros((T, m + 1, D, N_STATES))
    Gs = np.zeros((T, m + 1, D, N_STATES))
    B = np.zeros((m + 1, D, N_STATES))
    B[m, xf, :] = ker.end
    shifts = _Shifts(m, D, K, 0.0)
    for t in range(T - 1, -1, -1):
        BN = ker.skip_t(B.copy())
        wp, wu = WP[t], ker.user(WU, t)
        G = Gs[t]
        from_p, from_u = shifts.targets(BN[:, :, PERSONA], BN[:, :, USER])
        if K == 1:
            G[:, :, PERSONA] = from_p[:, :, 0] * wp[:, None, 0]
            G[:, :, USER] = from_u[:, :, 0] * wu[:, :, 0]
        else:
            G[:, :, PERSONA] = (from_p * wp[:, None, :]).sum(axis=2)
            G[:, :, USER] = (from_u * wu).sum(axis=2)
        if ker.use_pause:
            G[:-1, :, PAUSE] += (blank * KEEP[t])[:, None] * BN[1:, :, PAUSE]
        if ker.use_phantom:
            G[:, 1:, PAUSE] += PHANTOM_W[t] * BN[:, :-1, PAUSE]
        top = G.max()
        if top > 0:  # any per-label scale: the posteriors are normalised per label below
            G /= top
            BN /= top
        BNs[t] = BN
        B = ker.mix_t(G, t, run) if t > 0 else G

    # posteriors, every label at once: P(step at t) = M_t[src] * weight * BN_{t+1}[dst] / Z_t
    Ms = np.empty((T, m + 1, D, N_STATES))
    Ms[0] = a0[:, :, None] * ker.start[None, None, :]
    if T > 1 and run is not None:
        A_stay, A_leave = A[1:T] * run[0][1:], A[1:T] * run[1][1:]  # A_stay with P(s -> s)
        off = (A_leave.reshape(T - 1, -1, N_STATES) @ ker.trans_off[1:T]).reshape(A_leave.shape)
        if ker.has_cross:
            off[..., USER] += A_leave[..., PERSONA] * ker.trans_off[1:T, PERSONA, USER, None, None] * ker.pu1[1:T]
            off[..., PERSONA] += A_leave[..., USER] * ker.trans_off[1:T, USER, PERSONA, None, None] * ker.up1[1:T]
        Ms[1:] = off + A_stay
    elif T > 1:
        A_stay = A_leave = A[1:T]
        Ms[1:] = A[1:T] @ ker.trans[1:T, None, :, :]
    Z = (Ms * Gs).sum(axis=(1, 2, 3))
    Z = np.where(Z > 0, Z, 1.0)
    tt = np.arange(T)[:, None, None]
    for k in range(1, K + 1):
        if k <= m:
            pk = (Ms[:, : m + 1 - k, : D - k + 1, PERSONA] * BNs[:, k:, k - 1 :, PERSONA]).sum(axis=2)
            post.persona[:, : m + 1 - k, k - 1] = pk * WP[:, : m + 1 - k, k - 1] / Z[:, None]
        j = ker.j_index[:, :, : D - k + 1]
        pu = Ms[:, :, : D - k + 1, USER] * WU[tt, j, k - 1] * BNs[:, :, k - 1 :, USER]
        flat = np.bincount((tt * (n + 2) + j).ravel(), weights=pu.ravel(), minlength=T * (n + 2))
        post.user[:, :, k - 1] = flat.reshape(T, n + 2)[:, 1 : n + 1] / Z[:, None]
    if ker.use_pause:
        pz = (Ms[:, :-1, :, PAUSE] * BNs[:, 1:, :, PAUSE]).sum(axis=2)
        post.pause[:] = pz * blank[None, :] * KEEP[:, None] / Z[:, None]
    if ker.use_phantom:
        post.phantom[:] = (Ms[:, :, 1:, PAUSE] * BNs[:, :, :-1, PAUSE]).sum(axis=(1, 2)) * PHANTOM_W / Z
    post.start = ker.start * (a0[:, :, None] * Gs[0]).sum(axis=(0, 1)) / Z[0]
    if T > 1:
        flat_g = Gs[1:].reshape(T - 1, -1, N_STATES)
        AG = A_stay * Gs[1:]
        if run is not None:
            flat_a = A_leave.reshape(T - 1, -1, N_STATES)
            tr = (flat_a.transpose(0, 2, 1) @ flat_g) * ker.trans_off[1:T]
            if ker.has_cross:  # the changes' pair factors, and the expected changes by (i, j)
                g1 = Gs[1:]
                e_pu = A_leave[..., PERSONA] * ker.trans_off[1:T, PERSONA, USER, None, None] * g1[..., USER]
                e_up = A_leave[..., USER] * ker.trans_off[1:T, USER, PERSONA, None, None] * g1[..., PERSONA]
                tr[:, PERSONA, USER] += (e_pu * ker.pu1[1:T]).sum(axis=(1, 2))
                tr[:, USER, PERSONA] += (e_up * ker.up1[1:T]).sum(axis=(1, 2))
            d = np.arange(N_STATES)
            tr[:, d, d] = AG.sum(axis=(1, 2))
            post.transitions[1:] = tr / Z[1:, None, None]
            stay_w = np.broadcast_to(1 / Z[1:, None], (T - 1, N_STATES))
        else:
            flat_a = A[1:T].reshape(T - 1, -1, N_STATES)
            post.transitions[1:] = (flat_a.transpose(0, 2, 1) @ flat_g) * ker.trans[1:T] / Z[1:, None, None]
            stay_w = ker.trans_diag[1:T] / Z[1:, None]
        # stay / leave events by the run position of the state before label t:
        # P(state s at (i, x) before t, then s -> s) = AG * stay_w, and then s -> another state
        AH = A_leave * (flat_g @ ker.trans_off[1:T].swapaxes(-1, -2)).reshape(A_leave.shape)
        if run is not None and ker.has_cross:
            AH[..., PERSONA] += e_pu * ker.pu1[1:T]
            AH[..., USER] += e_up * ker.up1[1:T]
        leave_w = np.broadcast_to(1 / Z[1:, None], (T - 1, N_STATES))
        j = ker.j_index[1:T].ravel()
        for col, e, w in ((0, AG, stay_w), (1, AH, leave_w)):
            post.persona_run[:, col] = w[:, PERSONA] @ e[..., PERSONA].sum(axis=2)
            by_j = e[..., USER] * w[:, USER, None, None]
            post.user_run[:, col] = np.bincount(j, weights=by_j.ravel(), minlength=n + 2)[1:]
        # by (i, j): occupancy of persona / user states before label t and the speaker changes
        cell = (np.arange(m + 1)[None, :, None] * (n + 2) + ker.j_index[1:T]).ravel()
        size = (m + 1) * (n + 2)

        def by_cell(e: np.ndarray) -> np.ndarray:
            w = (e / Z[1:, None, None]).ravel()
            return np.bincount(cell, weights=w, minlength=size).reshape(m + 1, n + 2)[:, 1:]

        stay_p = stay_w * Z[1:, None]  # P(s -> s) where A_stay leaves it out, else 1
        post.persona_at[:] = by_cell(AG[..., PERSONA] * stay_p[:, None, None, PERSONA] + AH[..., PERSONA])
        post.user_at[:] = by_cell(AG[..., USER] * stay_p[:, None, None, USER] + AH[..., USER])
        if run is not None and ker.has_cross:
            post.persona_user[:] = by_cell(e_pu * (ker.pu1[1:T] + 1))
            post.user_persona[:] = by_cell(e_up * (ker.up1[1:T] + 1))
        else:
            e_pu = A_leave[..., PERSONA] * ker.trans_off[1:T, PERSONA, USER, None, None] * Gs[1:][..., USER]
            e_up = A_leave[..., USER] * ker.trans_off[1:T, USER, PERSONA, None, None] * Gs[1:][..., PERSONA]
            post.persona_user[:] = by_cell(e_pu)
            post.user_persona[:] = by_cell(e_up)
    return post


def viterbi(lat: Lattice) -> Path:
    """The best-scoring path.

    Args:
        lat: the scored lattice of one conversation.

    Returns:
        `Path` with the score (-inf and no steps when no path exists), the steps in label order
        and the blank persona items skipped. Ties go to the first candidate in the order persona,
        user, pause, phantom and shorter units first.
    """
    T, m = lat.T, lat.m
    if not lat.feasible:
        return Path(_NEG, [], [])
    if T == 0:
        score = _empty_score(lat)
        return Path(score, [], list(range(m)) if np.isfinite(score) else [])
    ker = _kernel(lat)
    K, D = ker.K, ker.D
    v0 = np.full((m + 1, D, N_STATES), _NEG)
    v0[0, -lat.x_lo] = 0.0
    skip_flags = np.zeros((T + 1, m + 1, D, N_STATES), dtype=bool)
    v0 = _skip_max(ker, v0, skip_flags[0])[:, :, 0]
    back = np.zeros((T, m + 1, D, N_STATES), dtype=np.int16)  # k for units, 1 pause / 2 phantom
    layers = np.zeros((T, m + 1, D, N_STATES))  # post-skip log-scores, to find where a state came from
    shifts = _Shifts(m, D, K, _NEG)
    blank_keep = np.where(lat.persona_blank, lat.log_keep, _NEG)
    run = ker.run_grids(log=True)
    if run is not None:  # s -> s' != s by the leave score, s -> s by the stay score
        d = np.arange(N_STATES)
        trans_off = lat.log_trans.copy()
        trans_off[:, d, d] = _NEG
        trans_diag = lat.log_trans[:, d, d]
    v = None
    for t in range(T):
        if t == 0:
            M = v0[:, :, None] + lat.log_start[None, None, :]
        else:
            if run is None:  # M[i, x, to] = max over s of v[i, x, s] + log P(to | s)
                M = v[:, :, 0, None] + lat.log_trans[t][0]
                for src in range(1, N_STATES):
                    np.maximum(M, v[:, :, src, None] + lat.log_trans[t][src], out=M)
            else:  # the same maxima one last state at a time (a max over a middle axis is slow)
                left = v + run[1][t]
                M = None
                for src in range(N_STATES):
                    X = left[:, :, src, None] + trans_off[t][src]
                    if ker.has_cross and src == PERSONA:
                        X[:, :, USER] += ker.log_pu[t]
                    elif ker.has_cross and src == USER:
                        X[:, :, PERSONA] += ker.log_up[t]
                    M = X if M is None else np.maximum(M, X, out=M)
                np.maximum(M, (v + run[0][t]) + trans_diag[t], out=M)
            layers[t] = v
        new = np.empty((m + 1, D, N_STATES))
        bp = np.zeros((m + 1, D, N_STATES), dtype=np.int16)
        lp = ker.log_p[t]
        lu = ker.user(ker.log_u_pad, t)
        to_p, to_u = shifts.sources(M[:, :, PERSONA, None] + lp[:, None, :], M[:, :, USER, None] + lu)
        for state, view in ((PERSONA, to_p), (USER, to_u)):
            if K == 1:  # one unit length: nothing to choose
                new[:, :, state] = view[:, :, 0]
                bp[:, :, state] = 1
            else:
                best_k = view.argmax(axis=2)  # ties: the shorter unit
                new[:, :, state] = view.max(axis=2)
                bp[:, :, state] = best_k + 1
        new[:, :, PAUSE] = _NEG
        if ker.use_pause:
            c = M[:-1, :, PAUSE] + blank_keep[:, None] + lat.emit_pause[t]
            better = c > new[1:, :, PAUSE]
            np.copyto(new[1:, :, PAUSE], c, where=better)
            np.copyto(bp[1:, :, PAUSE], 1, where=better)
        if ker.use_phantom:
            c = M[:, 1:, PAUSE] + lat.log_phantom + lat.emit_pause[t]
            better = c > new[:, :-1, PAUSE]
            np.copyto(new[:, :-1, PAUSE], c, where=better)
            np.copyto(bp[:, :-1, PAUSE], 2, where=better)
        back[t] = bp
        v = _skip_max(ker, new, skip_flags[t + 1])
    xf = lat.x_final - lat.x_lo
    s = int(np.argmax(v[m, xf] + ker.log_end))
    score = float(v[m, xf, s] + ker.log_end[s])
    if not np.isfinite(score):
        return Path(_NEG, [], [])
    steps: list[Step] = []
    skipped: list[int] = []
    i, xi, t = m, xf, T
    while True:
        while skip_flags[t, i, xi, s]:
            skipped.append(i - 1)
            i, xi = i - 1, xi - 1
        if t == 0:
            break
        code = int(back[t - 1, i, xi, s])
        if s == PERSONA:
            i, xi = i - code, xi - code + 1
            steps.append(Step(t - 1, PERSONA, i, code))
        elif s == USER:
            xi = xi - code + 1
            j = (t - 1) + (lat.x_lo + xi) - i
            steps.append(Step(t - 1, USER, j, code))
        elif code == 1:
            i -= 1
            steps.append(Step(t - 1, PAUSE, i, 1))
        else:
            xi += 1
            steps.append(Step(t - 1, PHANTOM, -1, 0))
        t -= 1
        if t > 0:
            if run is None:
                s = int(np.argmax(layers[t, i, xi] + lat.log_trans[t][:, s]))
            else:  # the same sums as in the max above
                s = int(np.argmax((layers[t, i, xi] + ker.run_column(run, t, i, xi, s)) + lat.log_trans[t][:, s]))
    steps.reverse()
    skipped.reverse()
    return Path(score, steps, skipped)


def _empty_score(lat: Lattice) -> float:
    """Score of a conversation without labels: possible only when every item is a skippable blank."""
    if lat.n or not lat.persona_blank.all():
        return _NEG
    return float(lat.log_skip * lat.m) if lat.m else 0.0


def _skip_max(ker: _Kernel, v: np.ndarray, flags: np.ndarray) -> np.ndarray:
    """Max-product skip closure in log space, marking the states reached by a skip."""
    if ker.use_skip:
        ls = ker.lat.log_skip
        for b in ker.blank_items:
            c = v[b, :-1] + ls
            better = c > v[b + 1, 1:]
            np.copyto(v[b + 1, 1:], c, where=better)
            np.logical_or(flags[b + 1, 1:], better, out=flags[b + 1, 1:])
    return v
