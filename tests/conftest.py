"""Shared fixtures: real data from ../shared/data, synthetic grouped data, a dask cluster, the
Prefect test harness."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

# Prefect state of the test run lives in a temporary folder, never in ~/.prefect.
os.environ.setdefault("PREFECT_HOME", tempfile.mkdtemp(prefix="fairpca-prefect-"))
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")

DATA_DIR = Path(os.environ.get("FAIRPCA_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
CREDIT_CSV = DATA_DIR / "pelegrina_fpca" / "default_degree.csv"


def require_data(path: Path) -> Path:
    """Real-data tests skip only when the data folder is absent and CI is unset."""
    if not path.exists():
        if os.environ.get("CI"):
            pytest.fail(f"real data {path} is missing in CI")
        pytest.skip(f"real data {path} not available")
    return path


@pytest.fixture(scope="session")
def credit_frame() -> pd.DataFrame:
    """Default of Credit Card Clients with Samadi et al.'s columns: 21 features (SEX … PAY_AMT5)
    and ``education`` = "high" for EDUCATION in {1, 2} (graduate school, university), else "low"."""
    frame = pd.read_csv(require_data(CREDIT_CSV), header=1)
    features = list(frame.columns[2:23])
    out = frame[features].astype(np.float64)
    out["education"] = np.where(frame["EDUCATION"].isin([1, 2]), "high", "low")
    return out


@pytest.fixture(scope="session")
def credit_standardized(credit_frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Samadi preprocessing: z-score every column with the global mean and the n−1 std."""
    x = credit_frame.drop(columns="education").to_numpy()
    x = (x - x.mean(axis=0)) / x.std(axis=0, ddof=1)
    return x, credit_frame["education"].to_numpy()


def grouped_data(
    n_rows: int = 600, n_features: int = 5, n_groups: int = 3, *, seed: int = 0, offset: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """Rows whose groups differ in mean and covariance; labels are strings."""
    rng = np.random.default_rng(seed)
    labels = rng.choice(
        [f"g{g}" for g in range(n_groups)],
        size=n_rows,
        p=np.linspace(2, 1, n_groups) / np.linspace(2, 1, n_groups).sum(),
    )
    x = np.empty((n_rows, n_features))
    for g in range(n_groups):
        mask = labels == f"g{g}"
        mixing = rng.normal(size=(n_features, n_features))
        x[mask] = rng.normal(size=(mask.sum(), n_features)) @ mixing + rng.normal(scale=3, size=n_features)
    return x + offset, labels


def reference_moments(x: np.ndarray, labels: np.ndarray, weights: np.ndarray | None = None):
    """Two-pass numpy statistics per sorted label, accurate for any offset: the data are first
    shifted by the rounded column mean (exact by Sterbenz' lemma for large offsets)."""
    shift = np.round(x.mean(axis=0))
    y = x - shift
    w_all = np.ones(len(x)) if weights is None else weights
    out = {}
    for g in sorted(set(labels.tolist())):
        mask = labels == g
        yg, wg = y[mask], w_all[mask]
        mean = wg @ yg / wg.sum()
        c = (yg - mean) * np.sqrt(wg)[:, None]
        out[g] = (int(mask.sum()), wg.sum(), mean + shift, c.T @ c)
    return out


@pytest.fixture(scope="session")
def dask_cluster():
    """A real distributed cluster: 2 worker processes on loopback, shared by the session. Not
    the default client: a test uses it by passing it, and the tests after it still run on
    threads when they pass no client."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster:
        with Client(cluster, set_as_default=False) as client:
            yield client


@pytest.fixture(scope="session")
def prefect_harness():
    """One Prefect test harness (temporary database and API server) for the session, started
    by the first test that asks for it (flow tests: ``pytest.mark.usefixtures``)."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        yield


@pytest.fixture(scope="session")
def s3():
    """A real S3 server (moto) on loopback for the session (tests/s3_server.py); its endpoint
    and credentials are set in the environment (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``,
    …), where s3fs, and the commands the tests start, find them."""
    pytest.importorskip("s3fs")
    from s3_server import start_server

    server = start_server()
    saved = {name: os.environ.get(name) for name in server.env}
    os.environ.update(server.env)
    try:
        yield server
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        server.stop()


@pytest.fixture
def s3_bucket(s3) -> str:
    """A new, empty bucket on the session's S3 server: its URL, ``s3://<name>``."""
    return f"s3://{s3.new_bucket()}"
