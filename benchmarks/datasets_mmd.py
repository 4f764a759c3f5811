"""The UCI datasets of Lee et al. (MMD-based fair PCA, "MBF-PCA", AAAI 2022, Table 1), rebuilt
from the raw files in ../shared/data as AIF360's built-in datasets build them (AIF360 itself
is not installed here).

The authors' ``datasets/*-preprocess.py`` (``nick-jhlee/fair-manifold-pca``) call

* ``CompasDataset(protected_attribute_names=['race'], privileged_classes=[['Caucasian']],
  features_to_drop=['sex', 'c_charge_desc'])``
* ``GermanDataset(protected_attribute_names=['age'], privileged_classes=[lambda x: x >= 25],
  features_to_drop=['sex', 'personal_status'])``
* ``AdultDataset(protected_attribute_names=['sex'], privileged_classes=[['Male']],
  features_to_drop=['fnlwgt', 'race'])``

and AIF360's ``StandardDataset`` then (1) applies the dataset's ``custom_preprocessing``, (2)
keeps the ``features_to_keep`` (all columns when empty) plus the protected attribute, the
categorical columns and the label, minus ``features_to_drop``, in the file's column order, (3)
drops every row with a missing value, (4) one-hot codes the categorical columns with
``pd.get_dummies(prefix_sep='=')`` (dummy columns appended at the end, categories sorted),
(5) **replaces the protected column by its 0/1 privileged indicator** (so the protected
attribute stays in the feature matrix, binarised) and (6) maps the label to 1 = favourable
class, 0 = the rest.

Resulting sizes (checked by ``python benchmarks/datasets_mmd.py``):

* COMPAS: ProPublica filters (|days_b_screening_arrest| ≤ 30, is_recid ≠ −1, c_charge_degree
  ≠ 'O', score_text ≠ 'N/A') and the rows without c_charge_desc dropped → 6,167 rows, p = 11
  (age, race, juv_fel_count, juv_misd_count, juv_other_count, priors_count, age_cat × 3,
  c_charge_degree × 2). Protected: race == Caucasian. Label: 1 = no two-year recidivism
  (AIF360's favourable class 0 of ``two_year_recid``).
* German: 1,000 rows, p = 57. Protected: age ≥ 25 (851 rows); the binarised age column is
  the 5th feature. Label: 1 = good credit. (The authors save ``labels - 1``, i.e. {0, −1};
  accuracy and |Δ_DP| do not depend on the coding.)
* Adult: adult.data + adult.test concatenated, rows with '?' dropped → 45,222 rows, p = 97.
  Protected: sex == Male (the 3rd feature). Label: 1 = income > 50K.

Every loader returns ``(features, label, protected, feature_names)``: a float64 DataFrame
(columns = feature_names, AIF360's order), and int arrays of 0/1.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"

LoadedDataset = tuple[pd.DataFrame, np.ndarray, np.ndarray, list[str]]


def _standard_dataset(
    df: pd.DataFrame,
    *,
    label_name: str,
    favorable: list,
    protected: str,
    privileged,
    categorical: list[str],
    keep: list[str] | None,
    drop: list[str],
) -> LoadedDataset:
    """AIF360 ``StandardDataset``'s steps (2)–(6) for one protected attribute."""
    columns = list(df.columns) if not keep else keep
    wanted = (set(columns) | {protected} | set(categorical) | {label_name}) - set(drop)
    df = df[sorted(wanted, key=df.columns.get_loc)]
    df = df.dropna()
    df = pd.get_dummies(df, columns=[c for c in categorical if c in df.columns], prefix_sep="=")
    if callable(privileged):
        priv = privileged(df[protected]).to_numpy()
    else:
        priv = df[protected].isin(privileged).to_numpy()
    df[protected] = priv.astype(float)
    label = df[label_name].isin(favorable).to_numpy().astype(int)
    features = df.drop(columns=[label_name]).astype(float).reset_index(drop=True)
    return features, label, priv.astype(int), list(features.columns)


def load_compas() -> LoadedDataset:
    """AIF360 ``CompasDataset`` (race, Caucasian privileged; sex and c_charge_desc dropped)."""
    df = pd.read_csv(DATA / "compas" / "compas-scores-two-years.csv", index_col="id")
    df = df[
        (df.days_b_screening_arrest <= 30)
        & (df.days_b_screening_arrest >= -30)
        & (df.is_recid != -1)
        & (df.c_charge_degree != "O")
        & (df.score_text != "N/A")
    ]
    keep = [
        "sex",
        "age",
        "age_cat",
        "race",
        "juv_fel_count",
        "juv_misd_count",
        "juv_other_count",
        "priors_count",
        "c_charge_degree",
        "c_charge_desc",
        "two_year_recid",
    ]
    # AIF360 keeps c_charge_desc until after dropna (it is in categorical_features), so rows
    # without a charge description are dropped although the column itself is not used.
    df = df[keep].dropna()
    return _standard_dataset(
        df,
        label_name="two_year_recid",
        favorable=[0],
        protected="race",
        privileged=["Caucasian"],
        categorical=["age_cat", "c_charge_degree"],
        keep=keep,
        drop=["sex", "c_charge_desc"],
    )


GERMAN_COLUMNS = [
    "status",
    "month",
    "credit_history",
    "purpose",
    "credit_amount",
    "savings",
    "employment",
    "investment_as_income_percentage",
    "personal_status",
    "other_debtors",
    "residence_since",
    "property",
    "age",
    "installment_plans",
    "housing",
    "number_of_credits",
    "skill_level",
    "people_liable_for",
    "telephone",
    "foreign_worker",
    "credit",
]
GERMAN_CATEGORICAL = [
    "status",
    "credit_history",
    "purpose",
    "savings",
    "employment",
    "other_debtors",
    "property",
    "installment_plans",
    "housing",
    "skill_level",
    "telephone",
    "foreign_worker",
]


def load_german() -> LoadedDataset:
    """AIF360 ``GermanDataset`` (age ≥ 25 privileged; sex and personal_status dropped)."""
    df = pd.read_csv(DATA / "german_credit" / "german.data", sep=r"\s+", header=None, names=GERMAN_COLUMNS)
    # AIF360's default_preprocessing adds 'sex' from personal_status (appended last); both are
    # dropped here, so only the row filter-free mapping matters for the column order.
    sex_map = {"A91": "male", "A93": "male", "A94": "male", "A92": "female", "A95": "female"}
    df["sex"] = df["personal_status"].replace(sex_map)
    return _standard_dataset(
        df,
        label_name="credit",
        favorable=[1],
        protected="age",
        privileged=lambda x: x >= 25,
        categorical=GERMAN_CATEGORICAL,
        keep=None,
        drop=["sex", "personal_status"],
    )


ADULT_COLUMNS = [
    "age",
    "workclass",
    "fnlwgt",
    "education",
    "education-num",
    "marital-status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "capital-gain",
    "capital-loss",
    "hours-per-week",
    "native-country",
    "income-per-year",
]
ADULT_CATEGORICAL = ["workclass", "education", "marital-status", "occupation", "relationship", "native-country"]


def load_adult() -> LoadedDataset:
    """AIF360 ``AdultDataset`` (sex, Male privileged; fnlwgt and race dropped): 45,222 × 97."""
    parts = [
        pd.read_csv(DATA / "adult" / name, header=None, names=ADULT_COLUMNS, skipinitialspace=True, na_values=["?"])
        for name in ("adult.data", "adult.test")
    ]
    df = pd.concat(parts, ignore_index=True)
    return _standard_dataset(
        df,
        label_name="income-per-year",
        favorable=[">50K", ">50K."],
        protected="sex",
        privileged=["Male"],
        categorical=ADULT_CATEGORICAL,
        keep=None,
        drop=["fnlwgt", "race"],
    )


LOADERS = {"COMPAS": load_compas, "German": load_german, "Adult": load_adult}

if __name__ == "__main__":
    for name, loader in LOADERS.items():
        x, y, a, names = loader()
        print(
            f"{name}: {x.shape[0]} rows x {x.shape[1]} features; label=1: {y.sum()}, "
            f"protected=1: {a.sum()}; first features {names[:6]}"
        )
