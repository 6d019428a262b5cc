"""Shared fixture builders: small corpora in every input format, written by the tests.

The texts are made up for the tests (Korean-looking, with the quirks of the real release:
`_` inside words, double and edge spaces, compatibility jamo, '♡'); no real sentences.

Builders return DataFrames or record lists that a test can alter before writing them, and the
`write_*` helpers put them on disk. Fixtures named after a format give a ready-written file.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pandas as pd
import pytest

from psyattrs.schema import OPELA

HEADS = OPELA.head_names
SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


# ----------------------------------------------------------------------------------------------
# OPELA annotated (FORMATS §2)


def annotated_frame() -> pd.DataFrame:
    """Two conversations, 7 sentences, one pause row; three labelers and final labels.

    doc `donut_user0001_2_4_1_2_3`: persona, user, pause (persona), user.
    doc `ferret_user0002_2_3_1_2_3`: user, persona, user (turn 2 written `2`).
    Labeler values per head follow a fixed pattern so tests can count them.
    """
    docs = ["donut_user0001_2_4_1_2_3"] * 4 + ["ferret_user0002_2_3_1_2_3"] * 3
    rows = {
        "doc_id": docs,
        "sent_id": [f"{d.rsplit('_', 5)[0]}_{i}" for d, i in zip(docs, [1, 2, 3, 4, 1, 2, 3])],
        "person_type": ["persona", "user", "persona", "user", "user", "persona", "user"],
        "person_name": ["donut", "user0001", "donut", "user0001", "user0002", "ferret", "user0002"],
        "person_name_original": ["꼬마 도넛", "", "꼬마 도넛", "", "", "조심성 페럿", ""],
        "turn_notation": [1, 1, 2, 2, 1, 1, 2],
        "time": ["2021-12-01 10:00"] * 7,
        "is_pause": [0, 0, 1, 0, 0, 0, 0],
        "text": ["안녕  반가워~! ㅎㅎ", " 나도 피곤하_다 ㅠㅠ", "", "좋아 ♡ ", "뭐 해?", "책 읽어ㅋㅋ", "NA"],
        "person_id": ["p01", "u0001", "p01", "u0001", "u0002", "p02", "u0002"],
    }
    df = pd.DataFrame(rows)
    pattern = {  # labeler k's value for head h on each of the 7 rows
        "strange": [1, 1, 1, 1, 0, 1, 1],
        "uneasy": [1, 1, 1, 1, 1, 1, 1],
        "engage": [1, 0, 0, 1, 1, 0, 1],
        "active": [1, 0, 0, 0, 1, 1, 0],
        "self": [2, 1, 0, 0, 1, 2, 1],
        "empathy": [3, 4, 0, 2, 3, 1, 0],
    }
    for h in HEADS:
        for k in (1, 2, 3):
            df[f"labeler{k}_{h}"] = pattern[h]
    for h in HEADS:
        df[f"labeler_{h}"] = pattern[h]
    return df


# ----------------------------------------------------------------------------------------------
# OPELA public release (FORMATS §3)

SURVEY = [
    "total_turn", "total_minutes", "total_pause", "age", "gender", "edu", "income", "open_chat_exp",
    "friend_persona", "friend_user", "attract_persona", "attract_user", "connect_persona", "connect_user",
    "respect_persona", "respect_user", "fun_persona", "fun_user", "natural_persona", "natural_user",
    "blri_persona", "blri_user",
]  # fmt: skip

#: The conversations of `public_frame`, with what the reader must find in them.
PUBLIC_CASES = {
    # a leading blank persona line (a pause); everything adds up
    "donut_user0001_2_6": dict(
        persona="\n안녕 반가워~!\n나는 오늘  빵을 구웠어 ㅎㅎ",
        user="안녕하세요 ♡\n저는 피곤하_다 ㅠㅠ\n 빵 좋아해요 ",
        total_sent=6, pause_count=1, pause_hour="[2]",
        check="adds up", persona_lines=3, persona_blank=1, user_lines=3, user_blank=0,
    ),
    # two pauses (blank persona lines) that total_sent does not count
    "ferret_user0002_3_5": dict(
        persona="오늘 뭐 했어?\n\n산책 다녀왔어\n\n잘 자~",
        user="그냥 쉬었어 ㅋㅋ\n좋다",
        total_sent=5, pause_count=2, pause_hour="[1, 24]",
        check="pauses not counted", persona_lines=5, persona_blank=2, user_lines=2, user_blank=0,
    ),
    # a message spanning two lines, a trailing newline, two blank user lines
    "librarian_user0003_2_4": dict(
        persona="책 좋아해?\n나는 요즘 소설을\n읽고 있어\n",
        user="응 좋아해\n\n\n추천해 줘",
        total_sent=4, pause_count=0, pause_hour="[]",
        check="3 extra lines", persona_lines=3, persona_blank=0, user_lines=4, user_blank=2,
    ),
    # fewer lines than labels
    "care_user0004_1_3": dict(
        persona="응", user="안녕", total_sent=3, pause_count=0, pause_hour="[]",
        check="1 fewer line", persona_lines=1, persona_blank=0, user_lines=1, user_blank=0,
    ),
}  # fmt: skip


def label_lists(n: int, seed: int) -> dict[str, list[int]]:
    """Valid final-label lists of length n for every OPELA head, a fixed function of seed."""
    out = {}
    for j, head in enumerate(OPELA.heads):
        out[head.name] = [(seed + 3 * i + j) % head.n_classes for i in range(n)]
    return out


def public_frame() -> pd.DataFrame:
    """The four conversations of `PUBLIC_CASES` in the public-release layout (38 columns)."""
    rows = []
    for i, (doc, case) in enumerate(PUBLIC_CASES.items()):
        row = {
            "doc_id": doc,
            "persona_name_original": ["꼬마도넛", "페럿", "사서", "프로관심러"][i],
            "user_id": f"61b7014{i:03d}",
            "total_sent": case["total_sent"],
            "pause_count": case["pause_count"],
            "pause_hour": case["pause_hour"],
        }
        for j, col in enumerate(SURVEY):
            row[col] = 1 + (i + j) % 4
        row["persona_text_all"] = case["persona"]
        row["user_text_all"] = case["user"]
        row["persona_summary"] = "#음식 이야기  #날씨"
        row["user_summary"] = "#산책#책"
        for head, values in label_lists(case["total_sent"], seed=i).items():
            row[f"labeler_{head}"] = str(values)
        rows.append(row)
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------------------------
# generic (FORMATS §5)

GENERIC_SCHEMA_YAML = """\
name: toy
heads:
  - name: abuse
    classes: {0: not abusive, 1: abusive}
  - name: severity
    classes: {0: none, 1: ambiguous, 2: mild, 3: strong, 4: very strong}
    ordinal: true
"""


def generic_frame() -> pd.DataFrame:
    """Two conversations, 6 rows, four labelers with empty cells, one context-only row."""
    return pd.DataFrame(
        {
            "doc_id": ["c1", "c1", "c1", "c2", "c2", "c2"],
            "text": ["hello there", "you again?", "bye", "첫 문장", "둘째  문장", "셋째"],
            "labeler1_abuse": [0, 1, None, 0, None, 1],
            "labeler2_abuse": [0, 1, None, None, None, 1],
            "labeler3_abuse": [1, None, None, 0, None, None],
            "labeler4_abuse": [None, 1, None, 0, None, 1],
            "labeler1_severity": [0, 3, None, 0, None, 4],
            "labeler2_severity": [0, 2, None, 1, None, 4],
            "labeler3_severity": [None, None, None, None, None, 3],
            "labeler4_severity": [1, 3, None, 0, None, None],
        }
    ).astype({c: "Int64" for c in [f"labeler{k}_{h}" for k in range(1, 5) for h in ("abuse", "severity")]})


# ----------------------------------------------------------------------------------------------
# PersonalDialog (FORMATS §4)


def personaldialog_records() -> list[dict]:
    """A train-kind record, a dev/test-kind record and one with every accepted variant."""
    return [
        {
            "dialog": ["今天 好 冷 啊", "是 啊 多 穿 点", "好 的"],
            "profile": [
                {"tag": ["旅游", "音乐"], "loc": "上海 浦东新区", "gender": "female"},
                {"tag": [""], "loc": "福建 厦门", "gender": "male"},
            ],
            "uid": [0, 1, 0],
        },
        {
            "dialog": ["吃饭 了 么", "吃 过 了"],
            "profile": [
                {"tag": ["学生"], "loc": "山东 济南", "gender": "male"},
                {"tag": ["设计师", "宅"], "loc": "北京 朝阳", "gender": "female"},
            ],
            "uid": [0, 1],
            "responder_profile": {"tag": ["学生"], "loc": "山东 济南", "gender": "male"},
            "golden_response": "那 就 好",
            "is_biased": True,
        },
        {
            "dialog": [["晚上 好"], ["你 好 呀"]],
            "profile": [
                {"tag": "跑步;读书", "loc": "广东 广州", "gender": "female"},
                {"tag": ["电影;游戏"], "loc": "四川 成都", "gender": "male"},
            ],
            "uid": [1, 0],
            "response_profile": {"tag": "跑步;读书", "loc": "广东 广州", "gender": "female"},
            "golden_response": ["最近 忙 吗"],
            "is_biased": False,
        },
    ]


# ----------------------------------------------------------------------------------------------
# writers and fixtures


def validate_is_clean(path: Path) -> None:
    """`psyattrs data validate PATH` ends 0 or 1, or 2 with exactly one `psyattrs: error:` line (no traceback)."""
    from psyattrs.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["data", "validate", str(path)])
    assert code in (0, 1, 2)
    if code == 2:
        lines = err.getvalue().strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("psyattrs: error: "), err.getvalue()


def write_csv(df: pd.DataFrame, path: Path, encoding: str = "utf-8") -> Path:
    """Writes a table as CSV in the given encoding (`utf-8-sig` for a BOM, `cp949`)."""
    df.to_csv(path, index=False, encoding=encoding)
    return path


def write_jsonl(records: list, path: Path) -> Path:
    """Writes records as JSON lines, UTF-8, non-ASCII unescaped."""
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


@pytest.fixture
def annotated_csv(tmp_path: Path) -> Path:
    return write_csv(annotated_frame(), tmp_path / "annotated.csv")


@pytest.fixture
def public_csv(tmp_path: Path) -> Path:
    return write_csv(public_frame(), tmp_path / "public.csv")


@pytest.fixture
def generic_schema(tmp_path: Path) -> Path:
    path = tmp_path / "toy.yaml"
    path.write_text(GENERIC_SCHEMA_YAML, encoding="utf-8")
    return path


@pytest.fixture
def generic_csv(tmp_path: Path) -> Path:
    return write_csv(generic_frame(), tmp_path / "generic.csv")


@pytest.fixture
def personaldialog_jsonl(tmp_path: Path) -> Path:
    return write_jsonl(personaldialog_records(), tmp_path / "pd.jsonl")


@pytest.fixture
def real_public_rows() -> Path:
    """The 135 real public-release rows in ../shared/data, or a skip when they are absent."""
    path = SHARED_DATA / "opela_public_rows.csv"
    if not path.is_file():
        pytest.skip(f"real data sample not present ({path})")
    return path


# ----------------------------------------------------------------------------------------------
# serving: ONE tiny trained model per test session (test_predict, test_registry, test_serve,
# test_annotate, test_spark)

TINY_MODEL_NAME = "psyattrs-tiny"


class TinyModel:
    """The session's tiny model: the shipped baseline_tfidf config shrunk to seconds, with one
    previous sentence of context, tuned thresholds and temperature calibration, tracked in a
    temporary sqlite store and registered as `psyattrs-tiny` with alias `champion`.

    Attributes:
        result: the `TrainResult`.
        tracking_uri: the temporary store.
        run_id: the run.
        registered: `models:/psyattrs-tiny@champion`.
        folder: the fitted model saved with `MultiHeadModel.save` (loads without MLflow).
    """

    def __init__(self, result, tracking_uri: str, registered: str, folder: Path):
        self.result = result
        self.tracking_uri = tracking_uri
        self.run_id = result.run_id
        self.model = result.model
        self.registered = registered
        self.folder = folder


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> TinyModel:
    from psyattrs.experiments.config import load_config
    from psyattrs.experiments.runner import train
    from psyattrs.serving.registry import register

    root = tmp_path_factory.mktemp("serving_store")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    config = load_config(
        Path(__file__).resolve().parents[1] / "experiments" / "baseline_tfidf.yaml",
        ["data.synthetic.dialogues=8", "data.synthetic.rare_boost=5", "model.params.words=none",
         "model.params.char_ngrams=[2, 3]", "model.params.max_iter=200", "context.previous=1",
         "model.tune_thresholds=true", "model.calibration=temperature", f"tracking.uri={uri}",
         "tracking.experiment=serving-tests"],
    )
    result = train(config, quiet=True)
    registration = register(result.run_id, TINY_MODEL_NAME, tracking_uri=uri)
    folder = root / "saved_model"
    result.model.save(folder)
    return TinyModel(result, uri, registration.uri, folder)
