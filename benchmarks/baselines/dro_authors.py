"""The authors' distributionally robust fair PCA solver (Vu, Tran, Yue, Nguyen, ICLR 2022), ported as published.

Source: GitHub ``hieuvt29/distributionally_robust_fair_pca``, file ``RFPCA/RFPCA.py``
(class ``RFPCA`` and driver ``_fit_RFPCA``; header "Algorithm 1 RFPCA Solver", author
Kam-Fung (Henry) Cheung), read at commit 86f0307dbd1ff2dd6a04fb7eb16706e4792e08a0 of the code
index (``spec/anchors-fairpca.md`` §4 names HEAD 725d411). The data preparation is ported from
``data_loaders.py`` (``normalize``, ``stratified_split_S_based``) and ``pareto.py``. Line
numbers ``L<n>`` below refer to ``RFPCA/RFPCA.py`` (258 lines, CRLF).

This is the baseline "authors' algorithm as published: 20 restarts, tau = 1000" against which
our own ``dro`` solver is timed. It keeps their arithmetic, the order of their operations and
their bugs; it is not a reference for what the paper's algorithm *should* compute (spec
``seeds-002-003.md`` §B.3, §B.4, §B.10 for that). The only change is that joblib is replaced by
a plain loop (Q16). Public entry points:

* :func:`fit_rfpca` — ``_fit_RFPCA`` + ``RFPCA(...).fit()`` on a data matrix and a 0/1 sensitive
  vector (the data are used as given; their pipeline z-scores them first, see
  :func:`authors_normalize` and :func:`authors_stratified_split`);
* :func:`fit_rfpca_moments` — the same solver fed the statistics directly
  (``M0, M1, p0, p1, eps0, eps1``), so it can get exactly what our ``dro`` solver gets;
* :class:`RFPCAPort` — the class itself, method for method.

Quirks and bugs kept (each is what their code does):

Q1  M_a is the *uncentred* second moment of the rows handed to the class:
    ``M_a = 1./N_a * X_a.T @ X_a`` (L45-48), evaluated as ``(X_a.T / N_a) @ X_a`` (Python
    precedence; kept). There is no centring inside the class. In their pipeline (``pareto.py``,
    ``data_loaders.load_data_olfat(..., standardize=True)``) X is the training split z-scored
    with the *training* mean and ``np.std`` (ddof = 0, zero std -> 1): every group is taken about
    the global training mean, i.e. M_a = Σ_a + μ_a μ_aᵀ. ``pareto.py`` also builds group-centred
    ``Atr``/``Btr``, but ``_fit_RFPCA`` only reads their row counts (L252); the group-centred
    rows feed the evaluation metrics, not the solver.
Q2  Marginals p_a = #(S == a) / N over *all* rows (L65-72). If S holds any other label the code
    prints the gap and "Marginals are WRONG!" and carries on; such rows count in N but in
    neither M_a (L45-46).
Q3  ``lamda == inf`` is replaced by min(p0, p1) / 2, with a print (L87-89). This test runs before
    the clip test.
Q4  Clip (L91-100): if λ > min(p0, p1), the full spectra of M_0 and M_1 are computed
    (``scipy.linalg.eigh``) and if for EITHER group the sum of its d-k smallest eigenvalues is
    ``< eps_a``, it prints "Conditions not met. Resetting lamda to minimum value." and sets
    λ := min(p0, p1). Theorem 3.2 asks, per group, for (i) λ <= p_a *or* (ii); the code demands
    (ii) of both groups as soon as λ exceeds the smaller p, so it also clips when the failing
    group is one for which (i) holds. When (ii) holds for both, λ > min(p) is kept although C_a
    is then indefinite (spec B.10-E2); nothing checks C_a ⪰ 0.
Q5  ``check_conditions`` runs before ``compute_constants`` (L51-53), so κ, θ, ϑ, C use the
    clipped λ. The constants are eq. (6b)/(6c) with absolute values in θ and ϑ (L74-84).
Q6  k >= d only prints "Warning! k has to be smaller than d." and continues (L59-63).
Q7  F_a (L103-109) forms the d x d matrix UUᵀ and takes three traces of d x d products
    (O(d³) each); no floor under the square roots (a negative trace gives NaN).
Q8  gradF (L124-131): (I - UUᵀ) as a d x d product, summands added as A + (B + 2C) (kept), and
    no guard: θ_a / sqrt(tr) is 0/0 = NaN when a trace is 0 (e.g. eps = 0 and U ⟂ range(M_a)),
    inf when θ > 0.
Q9  Argmax tie rule: ``if F(U,0) >= F(U,1)`` -> group 0, else group 1 (L230); a NaN comparison
    picks group 1. F_0 and F_1 are evaluated at the start of every iteration although the
    previous iteration just evaluated both at the same U for the history (L240): four F
    evaluations plus one gradient per iteration (kept, it is part of their cost).
Q10 Constant step γ = 1/sqrt(T + 1) for every iteration (L224, L227); the ``alpha`` argument of
    ``subgradient_descent`` is unused (L215). No stopping test: exactly T iterations.
Q11 QR retraction ``qf(U - γΔ)`` with sign fix ``q @ diag(sign(sign(diag r) + 0.5))``, so a zero
    diagonal entry counts as positive (L154-161, "copied from pymanopt"). The polar retraction
    ``retract``/``sqrtinv`` (L135-152) is defined but not used (commented out at L238); the
    ``loss``/``penalty`` helpers (L111-122) are unused too.
Q12 History ``Obj[i] = max(F_0, F_1)`` at the iterate *after* step i (L240); the starting value
    is not recorded; the *last* iterate is returned (L242), not the best one.
Q13 Starts (L189-199): first the PCA complement — eigenvectors of p0 M0 + p1 M1 for its d-k
    smallest eigenvalues (``scipy.linalg.eigh``, L190-191) — then ``retrial`` random starts
    ``qr(np.random.randn(d, d-k)).q`` with no sign fix (L163-168). That is retrial + 1 runs (21
    with the defaults), while the paper says 20 random initial points.
Q14 Randomness is numpy's *global* legacy generator, unseeded in the class (L166). ``pareto.py``
    calls ``np.random.seed(seed)`` once at start-up and, without ``--run_cv``, the RFPCA random
    starts are the first global draws. Here ``seed=None`` uses the global ``np.random`` exactly
    like their class; an int (or a ``RandomState``) uses ``np.random.RandomState(seed)``, which
    reproduces ``pareto.py --seed <seed>`` without cross-validation.
Q15 Selection (L172, L194, L201): keep the run whose *final* objective is strictly ``<`` the best
    so far, so ties keep the earlier run (the PCA start first) and NaN never wins. If every run
    ends in NaN, ``U`` is never bound and their code dies with UnboundLocalError at L208; the port
    raises the same exception.
Q16 joblib ``Parallel(n_jobs=10)`` over the random starts (L199) is replaced by a plain loop.
    joblib draws the starts in the parent, in order, while it consumes the generator, so the
    loop sees the same starting points and keeps the same run; only wall time changes (their
    parallel version used up to 10 processes, loky start-up included).
Q17 V = the eigenvectors of I - UUᵀ for its k largest eigenvalues, from a full
    ``scipy.linalg.eigh`` (L206-209). The k eigenvalues are all (numerically) 1, so V is an
    arbitrary orthonormal basis of range(I - UUᵀ): only VVᵀ is meaningful.
Q18 Driver (L245-258): eps = (alpha/sqrt(N_0), alpha/sqrt(N_1)) from the training group sizes
    (group 0 = ``S == 0``); it prints a progress line (dropped here) and returns V and VVᵀ.

Port notes: the prints of Q2/Q3/Q4/Q6 are kept (``verbose=False`` silences them). The returned
dict adds what their ``fit`` computes but throws away (every run's final objective, which run
was kept, the kept run's ``delta_norms``) and the λ actually used.

Checked in a scratch area (not shipped) against their class transcribed verbatim and run with
joblib: for the same ``np.random.seed`` the port returns bit-identical V, U and history on six
problems (λ = inf, a clip, a third label in S, credit). On their credit pipeline (seed 0, 30 %
train) it reproduces the ARE / ABDiff of ``spec/anchor-runs.md``. The kept run is chaotic: a
1-ulp change in M (e.g. M built with 2 instead of 1 BLAS thread) can change which run wins, but
on credit every run ends at the same objective and the subspace moves by ~1e-11.

Data preparation in their repo (ported in :func:`authors_normalize` and
:func:`authors_stratified_split`, not applied by :func:`fit_rfpca`): ``load_data_olfat`` reads
the CSV, drops only columns whose pandas std (ddof = 1) is exactly 0 (not the paper's
"<= 1e-5 or >= 1000" rule), takes the second-last column as label and the last as S, splits each
group separately with ``np.random.default_rng(seed)`` (``train_percent`` of each group, the
rest is test), and z-scores train with its own mean and ddof = 0 std (test with the train
statistics). For Default Credit their ``data/default_credit.csv`` has 22 features (LIMIT_BAL,
SEX, MARRIAGE, AGE, PAY_0, PAY_2..6, BILL_AMT1..6, PAY_AMT1..6) and S = 1 for EDUCATION >= 3
(5,371 of 30,000 rows), which is where the paper's d = 22 comes from.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.linalg as la

__all__ = [
    "RFPCAPort",
    "fit_rfpca",
    "fit_rfpca_moments",
    "group_second_moments",
    "authors_eps",
    "authors_normalize",
    "authors_stratified_split",
]


def _random_source(seed: Any) -> Any:
    """Q14: None -> numpy's global legacy generator (their code); int/RandomState -> a RandomState."""
    if seed is None:
        return np.random
    if isinstance(seed, np.random.RandomState):
        return seed
    return np.random.RandomState(seed)


class RFPCAPort:
    """``class RFPCA`` (L15-242) after the moment matrices exist; method names are theirs.

    ``M0``, ``M1``: the group second moments (Q1); ``P_0``, ``P_1``: the group shares (Q2);
    ``eps``: the two radii; ``random``: where ``rand()`` draws from (Q14).
    """

    def __init__(
        self,
        M0: np.ndarray,
        M1: np.ndarray,
        P_0: float,
        P_1: float,
        eps: np.ndarray,
        k: int = 1,
        lamda: float = 0.1,
        T: int = 1000,
        retrial: int = 20,
        random: Any = None,
        verbose: bool = True,
    ) -> None:
        self.verbose = verbose
        self.eps = eps
        self.k = k
        self.d = M0.shape[0]
        self.lamda = lamda
        self.T = T
        self.retrial = retrial
        self.M0 = M0
        self.M1 = M1
        self.M = np.array([self.M0, self.M1])  # L49
        self.P_0 = P_0
        self.P_1 = P_1
        self._random = np.random if random is None else random
        self.check_marginals()  # L51
        self.check_conditions()  # L52
        self.compute_constants()  # L53
        self.components_: Any = 0
        self.orthocomponents_: Any = 0
        self.error = False
        if self.k >= self.d:  # L60-63 (Q6)
            self._print("Warning! k has to be smaller than d.")
            self.error = True

    def _print(self, *args: Any) -> None:
        if self.verbose:
            print(*args)

    def check_marginals(self) -> None:
        """The check of ``get_marginals`` (L70-72, Q2)."""
        if np.abs(self.P_1 + self.P_0 - 1) > 1e-10:
            self._print(np.abs(self.P_1 + self.P_0 - 1))
            self._print("Marginals are WRONG!")

    def compute_constants(self) -> None:  # L74-84
        self.kappa = np.array(
            [
                (self.P_0 + self.lamda) * self.eps[0] + (self.P_1 - self.lamda) * self.eps[1],
                (self.P_1 + self.lamda) * self.eps[1] + (self.P_0 - self.lamda) * self.eps[0],
            ]
        )
        self.theta = np.array(
            [
                2 * np.abs(self.P_0 + self.lamda) * np.sqrt(self.eps[0]),
                2 * np.abs(self.P_1 + self.lamda) * np.sqrt(self.eps[1]),
            ]
        )
        self.vartheta = np.array(
            [
                2 * np.abs(self.P_0 - self.lamda) * np.sqrt(self.eps[0]),
                2 * np.abs(self.P_1 - self.lamda) * np.sqrt(self.eps[1]),
            ]
        )
        self.C = np.array(
            [
                (self.P_0 + self.lamda) * self.M0 + (self.P_1 - self.lamda) * self.M1,
                (self.P_1 + self.lamda) * self.M1 + (self.P_0 - self.lamda) * self.M0,
            ]
        )

    def check_conditions(self) -> bool:  # L86-101 (Q3, Q4)
        if self.lamda == np.inf:
            self.lamda = np.minimum(self.P_0, self.P_1) / 2
            self._print(f" set lambda = {self.lamda}")
        if self.lamda > np.minimum(self.P_0, self.P_1):
            w0 = la.eigh(self.M[0], eigvals_only=True)
            w1 = la.eigh(self.M[1], eigvals_only=True)
            if np.sum(w0[0 : (self.d - self.k)]) < self.eps[0] or np.sum(w1[0 : (self.d - self.k)]) < self.eps[1]:
                self._print("Conditions not met. Resetting lamda to minimum value.")
                self.lamda = np.minimum(self.P_0, self.P_1)
        return True

    def F(self, U: np.ndarray, a: int) -> float:  # L103-109 (Q7)
        UUT = U @ U.T
        res = (
            self.kappa[a]
            + self.theta[a] * np.sqrt(np.trace(UUT @ self.M[a]))
            + self.vartheta[1 - a] * np.sqrt(np.trace(UUT @ self.M[1 - a]))
            + np.trace(UUT @ self.C[a])
        )
        return res

    def gradF(self, U: np.ndarray, a: int) -> np.ndarray:  # L124-131 (Q8)
        UUT = U @ U.T
        out1 = np.trace(UUT @ self.M[a])
        out2 = np.trace(UUT @ self.M[1 - a])
        return (
            (np.eye(self.d) - UUT)
            @ (
                (self.theta[a] / np.sqrt(out1)) * self.M[a]
                + ((self.vartheta[1 - a] / np.sqrt(out2)) * self.M[1 - a] + 2 * self.C[a])
            )
            @ U
        )

    def qr_retract(self, X: np.ndarray, G: np.ndarray) -> np.ndarray:  # L156-161 (Q11)
        q, r = np.linalg.qr(X + G)
        XNew = np.dot(q, np.diag(np.sign(np.sign(np.diag(r)) + 0.5)))
        return XNew

    def rand(self) -> np.ndarray:  # L165-168 (Q13, Q14)
        X = self._random.randn(self.d, self.d - self.k)
        q, r = np.linalg.qr(X)
        return q

    def subgradient_descent(self, U0: np.ndarray, alpha: float = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Algorithm 1 from one start (L215-242; Q9, Q10, Q12). ``alpha`` is unused, as in theirs."""
        U = U0
        T = self.T
        Obj = np.zeros(T)
        delta_norms = np.zeros(T)
        gamma0 = 1 / np.sqrt(T + 1)
        for i in range(T):
            gamma = gamma0
            if self.F(U, 0) >= self.F(U, 1):
                Delta = self.gradF(U, 0)
            else:
                Delta = self.gradF(U, 1)
            delta_norms[i] = np.linalg.norm(Delta, "fro")
            U = self.qr_retract(U, -gamma * Delta)
            Obj[i] = np.maximum(self.F(U, 0), self.F(U, 1))
        return U, Obj, delta_norms

    def fit(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """L170-212 with joblib replaced by a loop (Q13, Q15, Q16, Q17). Returns (V, U, Obj)."""
        F_min = np.inf
        Obj = np.zeros(self.T)
        self.run_objectives_: list[float] = []
        self.kept_run_: int | None = None
        self.delta_norms_: np.ndarray | None = None

        w, v = la.eigh(self.P_0 * self.M0 + self.P_1 * self.M1)
        U0 = v[:, 0 : (self.d - self.k)]
        thisU, thisF, delta_norms = self.subgradient_descent(U0)
        self.run_objectives_.append(float(thisF[-1]))
        if thisF[-1] < F_min:
            U = thisU
            Obj = thisF
            F_min = thisF[-1]
            self.kept_run_, self.delta_norms_ = 0, delta_norms

        # Their L199: Parallel(n_jobs=10)(delayed(self.subgradient_descent)(self.rand()) for i in ...)
        res = []
        for _ in range(self.retrial):
            res.append(self.subgradient_descent(self.rand()))
        for idx, (thisU, thisF, delta_norms) in enumerate(res):
            self.run_objectives_.append(float(thisF[-1]))
            if thisF[-1] < F_min:
                U = thisU
                Obj = thisF
                F_min = thisF[-1]
                self.kept_run_, self.delta_norms_ = idx + 1, delta_norms

        if self.kept_run_ is None:  # Q15: their L208 reads an unbound U
            raise UnboundLocalError(
                "every RFPCA run ended with a NaN objective; the authors' fit() fails here "
                "(local variable 'U' referenced before assignment)"
            )
        w, V = la.eigh(np.eye(self.d) - U @ U.T)
        V = V[:, (self.d - self.k) : (self.d)]
        self.components_ = V
        self.orthocomponents_ = U
        return V, U, Obj


def _result(model: RFPCAPort, V: np.ndarray, U: np.ndarray, Obj: np.ndarray, lamda_in: float) -> dict[str, Any]:
    return {
        "V": V,
        "U": U,
        "objective": float(Obj[-1]),
        "history": Obj,
        "lamda_used": float(model.lamda),
        "lamda_clipped": bool(model.lamda != lamda_in),
        "eps": np.asarray(model.eps, dtype=float),
        "p": np.array([model.P_0, model.P_1], dtype=float),
        "run_objectives": np.array(model.run_objectives_),
        "kept_run": model.kept_run_,  # 0 = PCA-complement start, i >= 1 = i-th random start
        "delta_norms": model.delta_norms_,
    }


def group_second_moments(data: np.ndarray, sensitive: np.ndarray) -> tuple[np.ndarray, np.ndarray, float, float]:
    """(M0, M1, p0, p1) exactly as ``RFPCA.__init__`` and ``get_marginals`` compute them (L41-72, Q1, Q2)."""
    X = data
    S = sensitive
    N = X.shape[0]
    assert len(S) == N
    M0_idx = np.arange(N)[S == 0]
    M1_idx = np.arange(N)[S == 1]
    M0 = 1.0 / len(M0_idx) * X[M0_idx].T @ X[M0_idx]
    M1 = 1.0 / len(M1_idx) * X[M1_idx].T @ X[M1_idx]
    P_1 = np.sum(S == 1) / N
    P_0 = np.sum(S == 0) / N
    return M0, M1, P_0, P_1


def authors_eps(alpha: float, n0: int, n1: int) -> np.ndarray:
    """``_fit_RFPCA``'s radii (L252): alpha / sqrt(N_group) for group 0 (S == 0) and group 1."""
    return np.array([alpha / np.sqrt(n0), alpha / np.sqrt(n1)])


def fit_rfpca(
    data: np.ndarray,
    sensitive: np.ndarray,
    k: int,
    alpha: float = 0.15,
    lamda: float = 0.5,
    T: int = 1000,
    retrial: int = 20,
    seed: Any = None,
    verbose: bool = True,
) -> dict[str, Any]:
    """``_fit_RFPCA`` + ``RFPCA(eps, data, sensitives, k, lamda, T, retrial).fit()`` (L245-258).

    ``data``: N x d rows used as given (their pipeline passes the z-scored training split, see
    :func:`authors_stratified_split`); ``sensitive``: N labels, groups ``== 0`` and ``== 1``.
    Defaults are their ``configs/RFPCA.py`` (alpha 0.15, lamda 0.5, T_test 1000, retrial 20).
    ``seed``: see Q14. Returns a dict with ``V`` (d x k), ``U`` (d x (d-k)), ``objective`` (final
    max(F_0, F_1) of the kept run), ``history`` (its T values, Q12), ``lamda_used`` and extras.
    """
    data = np.asarray(data)
    sensitive = np.asarray(sensitive)
    eps = authors_eps(alpha, int(np.sum(sensitive == 0)), int(np.sum(sensitive == 1)))
    M0, M1, P_0, P_1 = group_second_moments(data, sensitive)
    model = RFPCAPort(
        M0, M1, P_0, P_1, eps, k=k, lamda=lamda, T=T, retrial=retrial, random=_random_source(seed), verbose=verbose
    )
    V, U, Obj = model.fit()
    return _result(model, V, U, Obj, lamda)


def fit_rfpca_moments(
    M0: np.ndarray,
    M1: np.ndarray,
    p0: float,
    p1: float,
    eps0: float,
    eps1: float,
    k: int,
    lamda: float = 0.5,
    T: int = 1000,
    retrial: int = 20,
    seed: Any = None,
    verbose: bool = True,
) -> dict[str, Any]:
    """The same solver on given statistics: M_a = (1/N_a) Σ_{i∈a} x_i x_iᵀ, p_a = N_a/N, radii eps_a.

    To match :func:`fit_rfpca` / their driver use ``eps_a = alpha / sqrt(N_a)`` (:func:`authors_eps`)
    and second moments about the global (training) mean, not group covariances (Q1).
    """
    M0 = np.asarray(M0, dtype=float)
    M1 = np.asarray(M1, dtype=float)
    P_0, P_1 = np.float64(p0), np.float64(p1)
    model = RFPCAPort(
        M0,
        M1,
        P_0,
        P_1,
        np.array([eps0, eps1], dtype=float),
        k=k,
        lamda=lamda,
        T=T,
        retrial=retrial,
        random=_random_source(seed),
        verbose=verbose,
    )
    V, U, Obj = model.fit()
    return _result(model, V, U, Obj, lamda)


# --------------------------------------------------------------------------- their data preparation
def authors_normalize(
    X: np.ndarray, mean: np.ndarray | None = None, std: np.ndarray | None = None, scale: bool = True
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """``data_loaders.normalize``: subtract the (given or own) column mean; if ``scale``, divide by the
    (given or own) ddof-0 std with zeros replaced by 1. Returns (X, mean, std) like theirs (note: their
    code writes the 0 -> 1 fix into a passed-in ``std`` array in place; so does this)."""
    mean = mean if mean is not None else X.mean(axis=0, keepdims=True)
    X = X - mean
    if scale:
        std = std if std is not None else X.std(axis=0, keepdims=True)
        std[np.where(std == 0)] = 1
        X = X / std
    return X, mean, std


def authors_stratified_split(
    X: np.ndarray, S: np.ndarray, Y: np.ndarray, perc: float, rng: Any, standardize: bool = True
) -> tuple[tuple, tuple]:
    """``data_loaders.stratified_split_S_based`` (called by ``load_data_olfat`` with
    ``rng = np.random.default_rng(seed)``): per group, shuffle and take the first int(perc * N_a)
    rows as train; shuffle train and test; z-score both with the train statistics (X is modified in
    place, as theirs). Returns ((Xtr, Str, Ytr), (Xte, Ste, Yte)); perc 0 or 1 as in theirs."""
    if perc == 0:
        if standardize:
            X = authors_normalize(X)[0]
        return (None, None, None), (X, S, Y)
    elif perc == 1.0:
        if standardize:
            X = authors_normalize(X)[0]
        return (X, S, Y), (None, None, None)
    if isinstance(rng, int):
        rng = np.random.default_rng(rng)
    assert len(X) == len(S)
    group0_idx = np.arange(len(X))[S == 0]
    group1_idx = np.arange(len(X))[S == 1]
    N0 = len(group0_idx)
    N1 = len(group1_idx)
    rng.shuffle(group0_idx)
    trainidx_g0 = group0_idx[: int(perc * N0)]
    testidx_g0 = group0_idx[int(perc * N0) :]
    rng.shuffle(group1_idx)
    trainidx_g1 = group1_idx[: int(perc * N1)]
    testidx_g1 = group1_idx[int(perc * N1) :]
    trainidx = np.concatenate([trainidx_g0, trainidx_g1], axis=0)
    testidx = np.concatenate([testidx_g0, testidx_g1], axis=0)
    rng.shuffle(trainidx)
    rng.shuffle(testidx)
    if standardize:
        X[trainidx], mean, std = authors_normalize(X[trainidx])
        X[testidx] = authors_normalize(X[testidx], mean, std)[0]
    return (X[trainidx], S[trainidx], Y[trainidx]), (X[testidx], S[testidx], Y[testidx])
