"""The dialogue simulation behind `psyattrs.synth`: one conversation between a persona and a user
(`psyattrs.synth.people`).

A conversation is a run of turns; a turn is one message of the speaker who starts the
conversation and one of the other speaker; a message is one to seven sentences. Each sentence
is an act (greeting, disclosure, reaction, answer, question, ...) planned from what the partner's
previous message did, then written from a template (`lexicon`). The true values of the six
OPELA attributes follow from the act, the template and the context:

- empathy: reactions, answers, on-topic remarks and follow-up questions respond to the partner and
  get levels 2-4, higher when the partner's last message disclosed feelings (self = 2); sentences
  that open something new get 0 (not applicable). Reaction wordings overlap between levels, so the
  level is only partly visible in the text and partly in the context.
- self: from the template (facts/tastes 1, feelings 2), with a small chance of a neighbouring level.
- active: questions and proposals; engage: drawn per act, and lively markers (laughter, '!',
  emoticons) are likelier on engaging sentences.
- strange = 0: an odd sentence, or a normal-looking one that does not fit the context (a reply of
  the wrong feeling, an answer to something never asked); uneasy = 0: rude or prying remarks;
  empathy = 1: a dismissive reply to a disclosure. Their rates are parameters (`rare_boost`).
- pause rows ("3시간 후") carry strange = uneasy = 1 and 0 on the other four heads.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from psyattrs.synth import lexicon as lex
from psyattrs.synth.people import PersonaSpec, UserSpec, pick_index

# fields of one sentence record, in order (ACT: the `lexicon` act, -1 for a pause; kept for
# analysis, not written to the table)
SPEAKER, TURN, MINUTE, IS_PAUSE, TEXT, STRANGE, UNEASY, ENGAGE, ACTIVE, SELF, EMPATHY, ACT = range(12)
PERSONA_SPEAKER, USER_SPEAKER = 0, 1


@dataclass(frozen=True)
class Rates:
    """Per-sentence probabilities of the rare events (after `rare_boost`)."""

    strange: float
    uneasy: float
    failure: float


# The numbers below are tuned so that the final labels follow the real release (FORMATS §3) once
# the three labelers' noise is added; `tests/test_synth.py` checks the resulting balance.

# base per-sentence probabilities of the rare events (failure: per reaction to a disclosure)
BASE_RATES = Rates(strange=0.0112, uneasy=0.0026, failure=0.0115)
PAUSE_HOURS = (1, 1, 1, 1, 2, 2, 3, 3, 4, 5, 6, 7, 24, 24, 24, 48, 72, 96, 120, 168)
PAUSE_COUNT_WEIGHTS = (0.04, 0.08, 0.12, 0.35, 0.15, 0.1, 0.07, 0.05, 0.04)  # P(0 pauses), ..., P(8)

# acts by their relation to the partner's last message
_ASKING = (lex.QUESTION, lex.FOLLOWUP, lex.SUGGEST)  # close a message
_RESPONSIVE = (lex.ANSWER, lex.ONTOPIC, lex.FOLLOWUP, -1)  # talk about the partner's thing; -1 a reaction
_OPENING = (lex.FACT, lex.FEEL_POS, lex.FEEL_NEG, lex.QUESTION, lex.SUGGEST)  # may change the topic
# share of answers / on-topic remarks / follow-ups written with a new-disclosure (or new-question) wording
_SHARED_WORDING = {lex.ANSWER: 0.85, lex.ONTOPIC: 0.75, lex.FOLLOWUP: 0.5}

# empathy level distributions {level: probability}; reactions by what the partner's last message
# disclosed (feelings, facts, nothing)
_EMP_REACT = {
    "feel": {4: 0.7, 3: 0.27, 2: 0.03},
    "fact": {4: 0.06, 3: 0.89, 2: 0.05},
    "none": {2: 0.3, 0: 0.6, 3: 0.1},
}
_EMP_ANSWER = {3: 0.88, 2: 0.03, 4: 0.04, 0: 0.05}
_EMP_ONTOPIC = {3: 0.77, 2: 0.04, 4: 0.05, 0: 0.14}
_EMP_FOLLOW = {"feel": {4: 0.6, 3: 0.36, 2: 0.04}, "other": {3: 0.8, 4: 0.10, 2: 0.04, 0: 0.06}}
_EMP_NEW = {0: 0.86, 3: 0.14}
_EMP_IGNORING = {2: 0.25, 0: 0.65, 3: 0.1}  # a new topic right after the partner disclosed feelings
_EMP_STRANGE = {0: 0.6, 2: 0.3, 3: 0.1}
_EMP_UNEASY = {0: 0.5, 2: 0.35, 3: 0.15}
# the wording pools a reaction of each level draws from, overlapping so that the wording only
# partly shows the level: ((act, probability), ...); None = the high-empathy pool of the partner's
# feeling (REACT4_POS or REACT4_NEG)
_REACT_POOLS = {
    4: ((None, 0.5), (lex.REACT3, 0.5)),
    3: ((lex.REACT3, 0.5), (None, 0.25), (lex.REACT2, 0.25)),
    2: ((lex.REACT2, 0.5), (lex.REACT3, 0.5)),
    1: ((lex.REACT1, 0.85), (lex.REACT2, 0.15)),
    0: ((lex.REACT2, 0.75), (lex.REACT3, 0.25)),
}
# P(engaging) by act, and for reactions by empathy level; lively speakers add up to +0.06
_ENGAGE = {
    lex.GREET: 0.55, lex.RETURN: 0.45, lex.FACT: 0.55, lex.FEEL_POS: 0.75, lex.FEEL_NEG: 0.62,
    lex.ONTOPIC: 0.72, lex.ANSWER: 0.5, lex.QUESTION: 0.86, lex.FOLLOWUP: 0.88, lex.FOLLOWUP_FEEL: 0.85,
    lex.SUGGEST: 0.9, lex.FILLER: 0.12, lex.CLOSING: 0.5, lex.STRANGE_ODD: 0.3, lex.STRANGE_CONTEXT: 0.15,
    lex.UNEASY: 0.05,
}  # fmt: skip
_ENGAGE_REACT = {4: 0.85, 3: 0.68, 2: 0.3, 1: 0.05, 0: 0.3}


def _draw(rng: random.Random, dist: dict[int, float]) -> int:
    r = rng.random()
    for level, p in dist.items():
        r -= p
        if r < 0:
            return level
    return level


@dataclass
class _MessageInfo:
    """What a message did, as the partner's next message sees it."""

    topic: int = -1
    thing: str = ""
    asked: bool = False
    max_self: int = 0
    valence: int = 0  # -1 negative feelings, +1 positive, 0 none


@dataclass
class _Speaker:
    kind: int
    style: "PersonaSpec | UserSpec"
    topic_ids: list[int] = field(default_factory=list)


class DialogueWriter:
    """Writes one conversation as a list of sentence records (see the column constants above).

    Args:
        rng: the conversation's random stream.
        persona: the persona; user: the user.
        rates: the rare-event probabilities.
    """

    def __init__(self, rng: random.Random, persona: PersonaSpec, user: UserSpec, rates: Rates, release_shape: bool = False):
        self.rng = rng
        self.release_shape = release_shape
        self.rnd = rng.random
        self.rates = rates
        self.speakers = (
            _Speaker(PERSONA_SPEAKER, persona, [lex.TOPIC_INDEX[t] for t in persona.topics]),
            _Speaker(USER_SPEAKER, user, [lex.TOPIC_INDEX[t] for t in user.topics]),
        )
        self.topic = self.rng.choice(self.speakers[0].topic_ids)
        self.rows: list[tuple] = []
        self.topics_used: tuple[set[int], set[int]] = (set(), set())
        self.things_used: tuple[list[str], list[str]] = ([], [])

    # ---- the conversation -----------------------------------------------------------------

    def write(self, n_turns: int, n_pauses: int) -> tuple[list[tuple], list[int]]:
        """Returns (sentence records, pause hours in order)."""
        rng = self.rng
        n_messages = 2 * n_turns
        if self.release_shape:
            # as every conversation read by hand: the user opens, the persona closes, and a pause
            # closes a persona run (the user's next message follows it)
            starter = USER_SPEAKER
            slots = [m for m in range(2, n_messages) if m % 2 == 0]
        else:
            starter = USER_SPEAKER if self.rnd() < 0.7 else PERSONA_SPEAKER
            # a pause may precede any persona message but the very first message
            slots = [m for m in range(1, n_messages) if (starter + m) % 2 == PERSONA_SPEAKER]
        pause_at = set(rng.sample(slots, min(n_pauses, len(slots))))
        hours: list[int] = []
        minute = 0
        last: list[_MessageInfo | None] = [None, None]  # last message of each speaker
        spoke = [False, False]
        for m in range(n_messages):
            turn = m // 2 + 1
            who = (starter + m) % 2
            after_pause = False
            if m in pause_at:
                h = rng.choice(PAUSE_HOURS)
                hours.append(h)
                minute += h * 60 + int(self.rnd() * 30)
                self.rows.append((PERSONA_SPEAKER, turn, minute, True, lex.pause_text(h), 1, 1, 0, 0, 0, 0, -1))
                after_pause = True
            elif m:
                minute += 1 + int(self.rnd() * 12)
            greet = not spoke[who] or (after_pause and self.rnd() < 0.5)
            closing = m >= n_messages - 2 and self.rnd() < 0.6
            info = self._message(who, last[1 - who], greet, after_pause and spoke[who], closing, turn, minute)
            spoke[who] = True
            last[who] = info
        return self.rows, hours

    # ---- one message ------------------------------------------------------------------------

    def _plan(self, who: int, partner: _MessageInfo | None, greet: bool, returning: bool, closing: bool) -> list[int]:
        rnd = self.rnd
        style = self.speakers[who].style
        plan: list[int] = []
        if greet:
            plan.append(lex.RETURN if returning else lex.GREET)
        if partner is not None:
            if partner.asked and rnd() < (0.97 if self.release_shape else 0.88):  # the question closed the partner's message
                plan.append(lex.ANSWER)
            elif self.release_shape and partner.thing and rnd() < 0.5:
                plan.append(lex.ONTOPIC)  # a reply that picks up what the partner talked about
            if partner.max_self >= 1 and rnd() < 0.5:
                plan.append(-1)  # reaction, level decided by context
            elif not partner.asked and rnd() < 0.12:
                plan.append(-1)
        has_thing = partner is not None and partner.thing != ""
        weights = [
            0.24,  # FACT
            0.16 * style.feel_rate,  # FEEL
            0.17 if has_thing else 0.0,  # FOLLOWUP
            0.11 if has_thing else 0.0,  # ONTOPIC
            0.25 * style.question_rate,  # QUESTION
            0.06,  # SUGGEST
            0.03,  # FILLER
        ]
        free = (lex.FACT, -2, lex.FOLLOWUP, lex.ONTOPIC, lex.QUESTION, lex.SUGGEST, lex.FILLER)
        n_free = min(6, _poisson(self.rng, style.verbosity))
        if n_free == 0 and len(plan) <= int(greet):
            n_free = 1
        extra = [free[pick_index(self.rng, weights)] for _ in range(n_free)]
        # questions and proposals close a message, as in chat
        plan += [a for a in extra if a not in _ASKING] + [a for a in extra if a in _ASKING]
        if closing:
            plan.append(lex.CLOSING)
        return plan

    def _message(
        self, who: int, partner: _MessageInfo | None, greet: bool, returning: bool, closing: bool, turn: int, minute: int
    ) -> _MessageInfo:
        info = _MessageInfo(topic=self.topic)
        for act in self._plan(who, partner, greet, returning, closing):
            self._sentence(act, who, partner, turn, minute, info)
        return info

    def _sentence(self, act: int, who: int, partner: _MessageInfo | None, turn: int, minute: int, info: _MessageInfo) -> None:
        """Writes one sentence of a planned act and records what it shows the partner in `info`."""
        rnd, rng = self.rnd, self.rng
        style = self.speakers[who].style
        if act == -2:
            act = lex.FEEL_NEG if rnd() < 0.45 else lex.FEEL_POS
        r = rnd()
        if r < self.rates.strange:
            act = lex.STRANGE_CONTEXT if partner is not None and rnd() < 0.5 else lex.STRANGE_ODD
        elif r < self.rates.strange + self.rates.uneasy:
            act = lex.UNEASY
        topic, thing = self._subject(act, who, partner)
        act, empathy, level = self._empathy(act, partner, style.empathy_shift)
        # answers and on-topic remarks often use the same wordings as new disclosures (follow-ups as
        # new questions): only the context (the partner's question, the partner's thing) tells them apart
        wording = act
        if act in _SHARED_WORDING and rnd() < _SHARED_WORDING[act]:
            if act == lex.FOLLOWUP:
                wording = lex.QUESTION
            else:
                wording = lex.FEEL_POS if act == lex.ANSWER and rnd() < 0.15 else lex.FACT
        tpl = lex.pick_template(rng, wording)
        text = self._fill(tpl, topic, thing, who)
        strange = 0 if act in (lex.STRANGE_ODD, lex.STRANGE_CONTEXT) or r < self.rates.strange else 1
        uneasy = 0 if act == lex.UNEASY else 1
        self_level = tpl.self_level
        if act == lex.FILLER:
            self_level = 0
        elif rnd() < 0.05:  # a neighbouring level: the wording does not decide everything
            self_level = self_level + 1 if self_level == 0 or (self_level == 1 and rnd() < 0.5) else self_level - 1
        p_engage = _ENGAGE_REACT[level] if level >= 0 else _ENGAGE.get(act, 0.5)
        engage = 1 if rnd() < min(0.97, p_engage + 0.1 * (style.laugh_rate - 1.0)) else 0
        if act == lex.FILLER:
            text = _filler_noise(text, rnd, style.laugh)
        else:
            sad = act in (lex.FEEL_NEG, lex.REACT4_NEG) or (act == lex.FOLLOWUP_FEEL and partner.valence < 0)
            text = lex.add_noise(
                text, rnd, rng, engage=bool(engage), sad=sad, laugh=style.laugh, laugh_rate=style.laugh_rate,
                cute=style.cute,
            )
        if tpl.active:
            active = 1 if rnd() < 0.93 else 0
        else:  # an exclamation makes a statement feel active more often
            active = 1 if rnd() < (0.45 if "!" in text else 0.05) else 0
        self.rows.append((who, turn, minute, False, text, strange, uneasy, engage, active, self_level, empathy, act))
        info.max_self = max(info.max_self, self_level)
        if wording in (lex.FEEL_POS, lex.FEEL_NEG):
            info.valence = 1 if wording == lex.FEEL_POS else -1
        if tpl.active and act != lex.SUGGEST:
            info.asked = True
        if "thing" in tpl.slots:
            info.topic, info.thing = topic, thing
            self.topics_used[who].add(topic)
            self.things_used[who].append(thing)

    def _subject(self, act: int, who: int, partner: _MessageInfo | None) -> tuple[int, str]:
        """(topic index, thing) of a sentence: the partner's for responses, else the conversation's."""
        rnd, rng = self.rnd, self.rng
        if act in _RESPONSIVE and partner is not None and partner.thing:
            return partner.topic, partner.thing
        if act in _OPENING and rnd() < 0.35:  # a change of topic, mostly to one the speaker likes
            ids = self.speakers[who].topic_ids
            self.topic = rng.choice(ids) if rnd() < 0.7 else int(rnd() * len(lex.TOPICS))
        return self.topic, rng.choice(lex.TOPICS[self.topic].things)

    def _empathy(self, act: int, partner: _MessageInfo | None, shift: float) -> tuple[int, int, int]:
        """(act, empathy, reaction level or -1): reactions get their wording pool as act here."""
        rnd, rng = self.rnd, self.rng
        feel_ctx = partner is not None and partner.max_self == 2
        if act == -1:
            ctx = "feel" if feel_ctx else ("fact" if partner is not None and partner.max_self == 1 else "none")
            if ctx != "none" and rnd() < self.rates.failure:
                level = 1
            else:
                level = _shift(rng, _draw(rng, _EMP_REACT[ctx]), shift)
            return self._react_pool(level, partner), level, level
        if act == lex.FOLLOWUP:
            if feel_ctx and rnd() < 0.6:
                act = lex.FOLLOWUP_FEEL
            return act, _shift(rng, _draw(rng, _EMP_FOLLOW["feel" if feel_ctx else "other"]), shift), -1
        if act == lex.ANSWER:
            return act, _shift(rng, _draw(rng, _EMP_ANSWER), shift), -1
        if act == lex.ONTOPIC:
            return act, _shift(rng, _draw(rng, _EMP_ONTOPIC), shift), -1
        if act in (lex.STRANGE_ODD, lex.STRANGE_CONTEXT):
            empathy = _draw(rng, _EMP_STRANGE)
            if act == lex.STRANGE_CONTEXT and partner is not None and partner.valence != 0 and rnd() < 0.6:
                act = lex.REACT4_POS if partner.valence < 0 else lex.REACT4_NEG  # the wrong feeling
            return act, empathy, -1
        if act == lex.UNEASY:
            return act, _draw(rng, _EMP_UNEASY), -1
        return act, _draw(rng, _EMP_IGNORING if feel_ctx and act != lex.FILLER else _EMP_NEW), -1

    def _react_pool(self, level: int, partner: _MessageInfo | None) -> int:
        r = self.rnd()
        for act, p in _REACT_POOLS[level]:
            r -= p
            if r < 0:
                break
        if act is None:
            return lex.REACT4_POS if partner is not None and partner.valence > 0 else lex.REACT4_NEG
        return act

    def _fill(self, tpl: lex.Template, topic_id: int, thing: str, who: int) -> str:
        rng = self.rng
        topic = lex.TOPICS[topic_id]
        values: dict[str, str] = {}
        for name in tpl.slots:
            if name == "thing":
                values[name] = thing
            elif name == "thing2":
                other = rng.choice(topic.things)
                values[name] = other if other != thing else topic.things[(topic.things.index(thing) + 1) % len(topic.things)]
            elif name == "cat":
                values[name] = topic.cat
            elif name == "pname":
                values[name] = self.speakers[1 - who].style.address
            elif name in topic.forms:
                values[name] = topic.forms[name]
            else:
                values[name] = rng.choice(lex.WORDS[name])
        text = lex.render(tpl.parts, values, self.speakers[who].style.polite)
        if text.startswith(" ") or "  " in text:
            text = " ".join(text.split())
        return text


def _shift(rng: random.Random, level: int, shift: float) -> int:
    """Moves a responsive empathy level one step up (shift > 0) or down with probability |shift|/4."""
    if level >= 2 and rng.random() < abs(shift) * 0.25:
        if shift > 0 and level < 4:
            return level + 1
        if shift < 0 and level > 2:
            return level - 1
    return level


def _poisson(rng: random.Random, lam: float) -> int:
    limit, k, p = math.exp(-lam), 0, rng.random()
    while p > limit:
        k += 1
        p *= rng.random()
    return k


def _filler_noise(text: str, rnd, laugh: str) -> str:
    if text[0] in "ㅋㅎ" and rnd() < 0.7:
        return text[0] * (2 + int(rnd() * 9))
    if rnd() < 0.15 and laugh in "ㅋㅎ":
        return text + laugh * (2 + int(rnd() * 4))
    return text


def draw_turns(rng: random.Random, lo: int, hi: int) -> int:
    """Number of turns: log-normal around 30, clipped to [lo, hi]."""
    return min(hi, max(lo, round(math.exp(rng.gauss(math.log(30), 0.35)))))


def draw_pause_count(rng: random.Random) -> int:
    """Number of pauses in a conversation (0-8, mostly 3)."""
    return pick_index(rng, list(PAUSE_COUNT_WEIGHTS))
