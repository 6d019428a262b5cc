"""Who talks in the synthetic corpus (`psyattrs.synth`): the eight personas (`PERSONAS`) and the
users (`make_user`), with their speaking styles, traits and demographics."""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass

from psyattrs.synth import lexicon as lex


@dataclass(frozen=True)
class PersonaSpec:
    """One simulated persona (the chatbot-like character a trained writer played).

    Attributes:
        name: short name (`donut`); also the `persona` grouping key.
        name_original: full name (`person_name_original`).
        person_id: id in the `person_id` column.
        concept: the persona's concept description.
        address: how users address the persona.
        polite: speaks in 존댓말 (else 반말).
        cute: ends sentences with 용 sometimes.
        laugh: laughter character (`ㅋ`, `ㅎ` or a fixed emoticon).
        laugh_rate: multiplier of the laughter probability.
        verbosity: mean extra sentences per message (Poisson).
        question_rate, feel_rate: multipliers of the question and feelings-disclosure acts.
        empathy_shift: -1..1, moves the empathy of responsive sentences down or up.
        topics: preferred topics (names from `lexicon.TOPICS`).
        weight: how often the persona appears.
        multiline_rate: share of its conversations where the public release splits messages over
            lines; uncounted_pause_rate: share whose pauses are not counted there;
            trailing_newline_rate: share whose persona text ends with a newline.
    """

    name: str
    name_original: str
    person_id: str
    concept: str
    address: str
    polite: bool
    cute: bool
    laugh: str
    laugh_rate: float
    verbosity: float
    question_rate: float
    feel_rate: float
    empathy_shift: float
    topics: tuple[str, ...]
    weight: float
    multiline_rate: float
    uncounted_pause_rate: float
    trailing_newline_rate: float


PERSONAS: tuple[PersonaSpec, ...] = (
    PersonaSpec("donut", "달콤한 도넛", "P01", "디저트를 세상에서 제일 좋아하는 꼬마 도넛. 반말로 종알종알 떠들고 단 음식과 동물 이야기를 좋아한다.",
                "도넛", False, True, "ㅎ", 1.2, 0.8, 1.0, 1.0, 0.2, ("food", "drink", "pet", "screen"), 12, 0.3, 0.02, 0.05),
    PersonaSpec("ferret", "호기심 많은 페럿", "P02", "궁금한 게 너무 많아 질문을 멈추지 않는 페럿. 존댓말을 쓰고 상대의 취미를 끝까지 파고든다.",
                "페럿", True, False, "ㅎ", 0.9, 0.7, 1.6, 0.8, 0.0, ("hobby", "sport", "game", "pet"), 26, 0.6, 0.15, 0.1),
    PersonaSpec("cafe", "동네 카페 사장", "P03", "작은 동네 카페를 운영하는 사장님. 커피와 손님 이야기, 게임을 좋아하고 말끝에 '용'을 붙이곤 한다.",
                "카페 사장", True, True, "ㅎ", 1.3, 0.9, 0.9, 1.0, 0.0, ("drink", "food", "game", "music"), 19, 0.15, 0.02, 0.03),
    PersonaSpec("librarian", "조용한 사서", "P04", "도서관에서 일하는 차분한 사서. 책과 드라마 이야기를 길게 나누고 한 메시지를 여러 줄로 끊어 보낸다.",
                "사서", True, False, "ㅎ", 0.6, 1.1, 0.9, 1.1, 0.1, ("book", "screen", "music", "hobby"), 12, 1.0, 0.02, 0.15),
    PersonaSpec("hungry", "배고픈 잠보", "P05", "먹는 것과 자는 것이 제일 좋은 잠보. 맛집 추천을 좋아하고 웃음이 많다.",
                "잠보", False, False, "ㅋ", 1.6, 1.0, 1.0, 0.9, 0.0, ("food", "drink", "travel", "game"), 31, 0.2, 0.02, 0.03),
    PersonaSpec("trip", "여행가 제이드", "P06", "세계 곳곳을 다녀 본 여행가 제이드. 여행지와 음식 이야기를 좋아하고 다음 여행을 같이 계획하자고 한다.",
                "제이드", True, False, "ㅎ", 1.0, 0.9, 1.1, 1.0, 0.1, ("travel", "food", "music", "sport"), 14, 0.1, 0.02, 0.03),
    PersonaSpec("bed", "침대 지킴이", "P07", "주말이면 침대 밖으로 나가지 않는 집순이. 드라마와 게임, 배달 음식 이야기를 짧게 여러 줄로 보낸다.",
                "침대러", False, False, "ㅋ", 1.3, 0.8, 0.9, 1.1, -0.2, ("screen", "game", "food", "book"), 14, 1.0, 0.02, 0.08),
    PersonaSpec("care", "다정한 상담러", "P08", "상대의 하루에 관심이 많은 다정한 친구. 고민을 잘 들어 주고 공감을 아끼지 않는다.",
                "상담러", False, False, "ㅎ", 1.0, 0.9, 1.2, 1.3, 0.8, ("sport", "food", "hobby", "screen"), 7, 0.0, 0.0, 0.0),
)


@dataclass(frozen=True)
class UserSpec:
    """One simulated user: speaking style, traits and demographics (see `make_user`)."""

    name: str
    user_id: str
    address: str
    polite: bool
    cute: bool
    laugh: str
    laugh_rate: float
    verbosity: float
    question_rate: float
    feel_rate: float
    empathy_shift: float
    topics: tuple[str, ...]
    leniency: float
    age: int
    gender: int
    edu: int
    income: int
    open_chat_exp: int


def pick_index(rng: random.Random, weights: list[float]) -> int:
    """An index drawn with probability proportional to `weights`."""
    r = rng.random() * sum(weights)
    for i, w in enumerate(weights):
        r -= w
        if r < 0:
            return i
    return len(weights) - 1


def make_user(seed: int, index: int) -> UserSpec:
    """The user with number `index + 1` of a corpus seeded `seed` (same values for any corpus size)."""
    rng = random.Random(f"user-{seed}-{index}")
    name = f"user{index + 1:04d}"
    digest = hashlib.sha1(f"{seed}:{name}".encode()).hexdigest()
    topic_names = [t.name for t in lex.TOPICS]
    rng.shuffle(topic_names)
    polite = rng.random() < 0.8
    return UserSpec(
        name=name,
        user_id="61" + digest[:18],
        address=rng.choice(lex.WORDS["nick"]),
        polite=polite,
        cute=rng.random() < 0.15,
        laugh=rng.choice(("ㅋ", "ㅋ", "ㅎ", "ㅎ", "ㅎ.ㅎ", "^^")),
        laugh_rate=rng.uniform(0.4, 1.6),
        verbosity=rng.uniform(0.4, 1.1),
        question_rate=rng.uniform(0.6, 1.4),
        feel_rate=rng.uniform(0.5, 1.5),
        empathy_shift=rng.uniform(-0.6, 0.6),
        topics=tuple(topic_names[:4]),
        leniency=rng.gauss(0.0, 0.35),
        age=min(63, max(19, round(rng.gauss(33, 8)))),
        gender=1 + pick_index(rng, [0.55, 0.43, 0.02]),
        edu=1 + pick_index(rng, [0.02, 0.05, 0.18, 0.6, 0.15]),
        income=1 + pick_index(rng, [0.25, 0.3, 0.25, 0.12, 0.08]),
        open_chat_exp=1 + pick_index(rng, [0.55, 0.45]),
    )


def pick_persona(rng: random.Random) -> PersonaSpec:
    """A persona drawn by weight."""
    return PERSONAS[pick_index(rng, [p.weight for p in PERSONAS])]


def persona_spec(name: str) -> PersonaSpec:
    """The simulated persona called `name` (ValueError naming the known ones)."""
    for p in PERSONAS:
        if p.name == name:
            return p
    raise ValueError(f"unknown persona {name!r}; known: {[p.name for p in PERSONAS]}")
