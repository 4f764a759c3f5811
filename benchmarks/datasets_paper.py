"""The datasets of Vu et al. (distributionally robust fair PCA, ICLR 2022, Table 2), read from
../shared/data as the authors' ``data_loaders.load_data_olfat`` reads them.

* Olfat & Aswani's CSVs (``olfat_fairml/``, byte-identical to the authors' copies except
  SkillCraft): features are all columns but the last two, the label is the second-to-last and
  the sensitive attribute the last. The authors drop columns whose (ddof 1) standard deviation
  is exactly 0, and perimX/perimY of Steel. Their SkillCraft copy lacks TotalHours (and has
  one row fewer, 3,337); ours drops TotalHours too, so every d equals the paper's Table 2. (The
  paper's text also says columns with std ≥ 1000 were dropped; the d of its Table 2 shows they
  were not: that rule would leave Taiwan Credit with 9 of its 22 features.)
* Default Credit: the authors' ``default_credit.csv`` is not in ../shared/data; it is rebuilt
  from ``pelegrina_fpca/default_degree.csv`` (the same UCI table): 22 features LIMIT_BAL, SEX,
  MARRIAGE, AGE, PAY_0 (PAY_1 in that file), PAY_2..6, BILL_AMT1..6, PAY_AMT1..6, and S = 1 for
  EDUCATION ≥ 3 (5,371 of 30,000 rows; the 14 rows with EDUCATION 0 count as high education).

Every loader returns a DataFrame of the features, the sensitive column ``s`` (0/1) and a row
key ``id`` (the row number), ready for ``compute_moments(..., cells=HashCells(("id",), …))``.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"

#: Paper name → Olfat file (None: the credit table rebuilt from Pelegrina's copy).
DRO_DATASETS: dict[str, str | None] = {
    "Default Credit": None,
    "Biodeg": "Biodeg_Data.csv",
    "E. Coli": "Ecoli_Data.csv",
    "Energy": "Energy_Data.csv",
    "German Credit": "German_Credit_Data.csv",
    "Image": "Image_Seg_Data.csv",
    "Letter": "Letter_Rec_Data.csv",
    "Magic": "Magic_Data.csv",
    "Parkinsons": "Parkinsons_Data.csv",
    "SkillCraft": "SkillCraft_Data.csv",
    "Statlog": "Statlog_Data.csv",
    "Steel": "Steel_Data.csv",
    "Taiwan Credit": "Taiwanese_Credit_Data.csv",
    "Wine Quality": "Wine_Quality_Data.csv",
}

#: Columns the authors drop besides the constant ones (see the module docstring).
_DROPPED = {"Steel_Data.csv": ["perimX", "perimY"], "SkillCraft_Data.csv": ["TotalHours"]}

CREDIT_FEATURES = [
    "LIMIT_BAL",
    "SEX",
    "MARRIAGE",
    "AGE",
    "PAY_0",
    *(f"PAY_{i}" for i in range(2, 7)),
    *(f"BILL_AMT{i}" for i in range(1, 7)),
    *(f"PAY_AMT{i}" for i in range(1, 7)),
]


def load_default_credit() -> pd.DataFrame:
    """The authors' Default Credit table: 30,000 rows, 22 features, ``s`` = EDUCATION ≥ 3."""
    raw = pd.read_csv(DATA / "pelegrina_fpca" / "default_degree.csv", header=1).rename(columns={"PAY_1": "PAY_0"})
    frame = raw[CREDIT_FEATURES].astype(float)
    frame["s"] = (raw["EDUCATION"] >= 3).astype(int)
    frame["id"] = range(len(frame))
    return frame


def load_olfat(file: str) -> pd.DataFrame:
    """One of Olfat & Aswani's CSVs with the authors' column drops."""
    raw = pd.read_csv(DATA / "olfat_fairml" / file, skipinitialspace=True)
    std = raw.std(axis=0)
    raw = raw.drop(columns=[*std[std == 0].index, *_DROPPED.get(file, [])])
    frame = raw.iloc[:, :-2].astype(float)
    frame.columns = [str(c) for c in frame.columns]
    frame["s"] = raw.iloc[:, -1].astype(int).to_numpy()
    frame["id"] = range(len(frame))
    return frame


def load_dro_dataset(name: str) -> pd.DataFrame:
    """A dataset of :data:`DRO_DATASETS` by its paper name."""
    file = DRO_DATASETS[name]
    return load_default_credit() if file is None else load_olfat(file)


def features_of(frame: pd.DataFrame) -> list[str]:
    """The feature columns of a loaded frame (everything but ``s`` and ``id``)."""
    return [c for c in frame.columns if c not in ("s", "id")]
