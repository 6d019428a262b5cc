"""Korean vocabulary and sentence templates of the synthetic corpus (see `psyattrs.synth`).

Every sentence the simulation writes is a template from this module with its slots filled and chat
noise added. Templates are written once in both speech levels with a small syntax:

- `{slot}` is replaced by a value (`{thing}`, `{time}`, ...; see `SLOT_NAMES`);
- `{slot/을}` adds the particle that fits the value's last syllable (을/를, 은/는, 이/가, 과/와,
  이랑/랑, 으로/로, 이나/나, and 이야 which becomes 이야/야 or 이에요/예요 by speech level);
- `{banmal|polite}` picks one side by the speaker's speech level; either side may hold slots.

Each template carries the attribute values its wording implies (`self` level, whether it asks or
proposes something, i.e. is active); the simulation decides the rest from the dialogue context.
All sentences here were written for this project.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Callable

# --------------------------------------------------------------------------------------------
# Slot fillers
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Topic:
    """A conversation topic: the things talked about and the verb forms that go with them.

    Attributes:
        name: identifier (`food`, `travel`, ...).
        cat: the category noun used in questions ("제일 좋아하는 {cat}").
        label: hashtag text for the conversation summaries.
        things: concrete nouns of the topic.
        forms: verb forms keyed by slot name: pres (먹어), past (먹었어), paststem (먹었),
            want (먹고 싶어), mod (먹는), purp (먹으러), try (먹어 봤), what (뭐 / 어디).
    """

    name: str
    cat: str
    label: str
    things: tuple[str, ...]
    forms: dict[str, str] = field(hash=False)


def _forms(pres: str, past: str, want: str, mod: str, purp: str, tried: str, what: str = "뭐") -> dict[str, str]:
    return {
        "pres": pres,
        "past": past,
        "paststem": past[:-1],
        "want": want,
        "mod": mod,
        "purp": purp,
        "try": tried,
        "what": what,
    }


_EAT = _forms("먹어", "먹었어", "먹고 싶어", "먹는", "먹으러", "먹어 봤")
_DRINK = _forms("마셔", "마셨어", "마시고 싶어", "마시는", "마시러", "마셔 봤")
_GO = _forms("가", "갔어", "가고 싶어", "가는", "놀러", "가 봤", what="어디")
_SEE = _forms("봐", "봤어", "보고 싶어", "보는", "보러", "봐 봤")
_HEAR = _forms("들어", "들었어", "듣고 싶어", "듣는", "들으러", "들어 봤")
_DO = _forms("해", "했어", "하고 싶어", "하는", "하러", "해 봤")
_READ = _forms("읽어", "읽었어", "읽고 싶어", "읽는", "읽으러", "읽어 봤")

TOPICS: tuple[Topic, ...] = (
    Topic("food", "음식", "음식 이야기", (
        "떡볶이", "김치찌개", "마라탕", "초밥", "삼겹살", "짜장면", "파스타", "치킨", "곱창", "라면",
        "비빔밥", "냉면", "햄버거", "피자", "순댓국", "쌀국수", "돈가스", "샐러드", "부대찌개", "칼국수",
        "족발", "닭갈비", "김밥", "우동", "감자탕", "마카롱", "붕어빵", "호떡", "회", "타코",
        "카레", "갈비찜", "잔치국수", "수제비", "크로플", "와플", "탕후루", "빙수", "닭강정", "생선구이",
    ), _EAT),
    Topic("drink", "음료", "음료 이야기", (
        "아메리카노", "라떼", "녹차", "밀크티", "생맥주", "막걸리", "레몬에이드", "핫초코", "콜드브루",
        "버블티", "유자차", "바닐라라떼", "하이볼", "스무디", "보리차", "딸기라떼", "자몽에이드", "와인",
    ), _DRINK),
    Topic("travel", "여행지", "여행 이야기", (
        "제주도", "부산", "강릉", "여수", "경주", "속초", "전주", "오사카", "다낭", "방콕", "파리", "대만",
        "통영", "가평", "남해", "춘천", "하와이", "스위스", "홍콩", "삿포로", "발리", "뉴욕", "포항", "담양",
    ), _GO),
    Topic("screen", "영화", "영화 드라마 이야기", (
        "로맨스 영화", "공포 영화", "액션 영화", "애니메이션", "다큐멘터리", "스릴러", "사극 드라마",
        "의학 드라마", "예능", "좀비 영화", "히어로 영화", "법정 드라마", "청춘 드라마", "추리 예능",
        "시트콤", "뮤지컬 영화", "재난 영화", "연애 프로그램",
    ), _SEE),
    Topic("music", "음악", "음악 이야기", (
        "발라드", "힙합", "재즈", "인디 음악", "아이돌 노래", "클래식", "락", "트로트", "시티팝",
        "밴드 음악", "피아노 연주곡", "뮤지컬 넘버", "R&B", "영화 OST", "동요", "lofi 음악",
    ), _HEAR),
    Topic("sport", "운동", "운동 이야기", (
        "요가", "필라테스", "클라이밍", "러닝", "수영", "테니스", "볼링", "자전거", "등산", "홈트",
        "배드민턴", "골프", "스키", "보드", "헬스", "줄넘기", "탁구", "크로스핏",
    ), _DO),
    Topic("game", "게임", "게임 이야기", (
        "롤", "배그", "피파", "마인크래프트", "닌텐도", "보드게임", "모바일 게임", "오버워치", "스타",
        "동물의 숲", "카트라이더", "테트리스", "방탈출", "포켓몬 게임",
    ), _DO),
    Topic("book", "책", "책 이야기", (
        "소설", "에세이", "웹툰", "추리 소설", "만화책", "자기계발서", "시집", "판타지 소설", "역사책",
        "그림책", "과학책", "여행 에세이", "요리책", "무협지",
    ), _READ),
    Topic("pet", "동물", "동물 이야기", (
        "고양이", "강아지", "햄스터", "앵무새", "거북이", "토끼", "고슴도치", "수달", "판다", "펭귄",
        "알파카", "돌고래", "다람쥐", "레서판다",
    ), _SEE),
    Topic("hobby", "취미", "취미 이야기", (
        "뜨개질", "베이킹", "캠핑", "낚시", "그림 그리기", "사진 찍기", "퍼즐", "요리", "피아노 연습",
        "노래방", "드라이브", "필사", "레고 조립", "다이어리 꾸미기", "식물 키우기", "보석십자수",
    ), _DO),
)
TOPIC_INDEX: dict[str, int] = {t.name: i for i, t in enumerate(TOPICS)}

WORDS: dict[str, tuple[str, ...]] = {
    "time": ("오늘", "어제", "아까", "주말에", "지난주에", "어젯밤에", "점심에", "퇴근하고", "아침에",
             "며칠 전에", "저번 달에", "방금", "오랜만에", "새벽에", "연휴에", "수업 끝나고"),
    "with": ("친구랑", "엄마랑", "동생이랑", "혼자", "회사 동료랑", "가족들이랑", "룸메이트랑", "아빠랑",
             "동아리 사람들이랑", "사촌이랑", "애인이랑", "언니랑", "형이랑", "대학 동기들이랑"),
    "adv": ("진짜", "완전", "너무", "엄청", "되게", "정말", "꽤", "좀", "제일", "넘"),
    "fpos": ("행복했어", "기분이 좋았어", "설렜어", "뿌듯했어", "마음이 편했어", "힐링됐어", "신났어",
             "감동받았어", "들떴어", "흐뭇했어", "후련했어", "즐거웠어"),
    "fposnow": ("행복해", "설레", "뿌듯해", "편안해", "신나", "들떠", "기뻐", "감사해", "든든해"),
    "fneg": ("속상했어", "우울했어", "서운했어", "지쳤어", "외로웠어", "짜증났어", "불안했어",
             "답답했어", "힘들었어", "서러웠어", "허무했어", "무서웠어", "긴장됐어"),
    "fnegnow": ("우울해", "지쳐", "외로워", "불안해", "속상해", "답답해", "피곤해", "서운해", "막막해",
                "스트레스 받아", "걱정돼", "허전해", "예민해"),
    "worry": ("회사 일", "시험", "이사", "취업 준비", "인간관계", "건강", "돈 문제", "야근", "가족 일",
              "진로", "월세", "마감", "팀 프로젝트", "이직 고민", "대출", "층간소음"),
    "job": ("회사원", "대학생", "간호사", "개발자", "디자이너", "선생님", "취준생", "공무원", "대학원생",
            "요리사", "마케터", "은행원", "프리랜서", "승무원", "약사", "연구원"),
    "city": ("서울", "부산", "인천", "대전", "대구", "광주", "수원", "울산", "제주", "청주", "전주",
             "창원", "성남", "고양", "원주", "안산"),
    "n": ("한", "두", "세", "네"),
    "odd": ("냉장고", "구름", "신발", "숟가락", "달", "화분", "우산", "지하철", "양말", "시계",
            "베개", "고무장갑", "가로등", "수박"),
    "nick": ("하늘", "콩이", "민트", "별빛", "도토리", "구름", "바다", "솜사탕", "망고", "라임", "초코",
             "유자", "모카", "호두", "보리", "단비", "새벽", "이슬", "햇살", "봄날", "카키", "두부"),
}
SLOT_NAMES: tuple[str, ...] = (
    ("thing", "thing2", "cat", "pname") + tuple(TOPICS[0].forms) + tuple(WORDS)
)

# --------------------------------------------------------------------------------------------
# Templates. (text, self level, active, valence) - valence only for disclosures and reactions.
# --------------------------------------------------------------------------------------------

# sentence acts (indices into TEMPLATES)
GREET, FACT, FEEL_POS, FEEL_NEG, ONTOPIC, ANSWER, QUESTION, FOLLOWUP, FOLLOWUP_FEEL, SUGGEST = range(10)
REACT4_POS, REACT4_NEG, REACT3, REACT2, REACT1, FILLER, CLOSING, RETURN = range(10, 18)
STRANGE_ODD, STRANGE_CONTEXT, UNEASY = range(18, 21)
N_ACTS = 21

_RAW: dict[int, list[tuple[str, int, bool]]] = {
    GREET: [
        ("{안녕|안녕하세요}!", 0, False), ("{안녕 {pname}|{pname}님 안녕하세요}", 0, False),
        ("{반가워|반가워요}", 0, False), ("{좋은 아침이야|좋은 아침이에요}", 0, False),
        ("{오늘 날씨 진짜 춥다|오늘 날씨 정말 춥네요}", 0, False), ("{잘 지냈어?|잘 지내셨어요?}", 0, True),
        ("{뭐 하고 있었어?|뭐 하고 계셨어요?}", 0, True), ("{하이 {pname}|{pname}님 반가워요}", 0, False),
        ("{오늘 하루 어땠어?|오늘 하루 어떠셨어요?}", 0, True),
        ("{나 방금 일어났어|저 방금 일어났어요}", 1, False), ("{나 지금 퇴근했어|저 지금 퇴근했어요}", 1, False),
        ("{나 오늘 좀 바빴어|저 오늘 좀 바빴어요}", 1, False),
    ],
    RETURN: [
        ("{나 왔어|저 왔어요}", 0, False), ("{다시 왔어|다시 왔어요}", 0, False),
        ("{오래 기다렸지?|오래 기다리셨죠?}", 0, True), ("{미안 늦게 확인했어|죄송해요 늦게 확인했어요}", 0, False),
        ("{그동안 잘 있었어?|그동안 잘 계셨어요?}", 0, True),
        ("{나 밥 먹고 왔어|저 밥 먹고 왔어요}", 1, False), ("{나 씻고 왔어|저 씻고 왔어요}", 1, False),
    ],
    FACT: [
        ("{time} {with} {thing} {past}{|요}", 1, False), ("{나}는 {thing/을} {adv} 좋아해{|요}", 1, False),
        ("요즘 {thing}에 {adv} 빠져 있어{|요}", 1, False), ("{나}는 주로 {with} {thing} {pres}{|요}", 1, False),
        ("일주일에 {n} 번은 {thing} {mod} 편이{야|에요}", 1, False),
        ("{time} {thing} {purp} 갔다 왔어{|요}", 1, False), ("{time} {thing} {try}는데 {adv} 괜찮았어{|요}", 1, False),
        ("{thing} {mod} 거 좋아해서 자주 {pres}{|요}", 1, False),
        ("원래 {thing} 잘 안 {mod}데 요즘은 자주 {pres}{|요}", 1, False),
        ("{나}는 {thing}보다 {thing2/이} 더 좋아{|요}", 1, False), ("{내} 최애는 {thing/이야}", 1, False),
        ("{나}는 {city}에 살아{|요}", 1, False), ("{나}는 {job/이야}", 1, False),
        ("{time} {with} {city}에서 {thing} {past}{|요}", 1, False), ("{thing/은} 매일 {pres}{|요}", 1, False),
        ("{나}는 {thing} {mod} 데 돈 제일 많이 써{|요}", 1, False),
        ("{time} 처음으로 {thing} {try}어{|요}", 1, False), ("{with} {thing} {mod} 게 {내} 주말 루틴이{야|에요}", 1, False),
    ],
    FEEL_POS: [
        ("{time} {with} {thing} {paststem}는데 {adv} {fpos}{|요}", 2, False),
        ("{thing} {mod} 시간이 {내} 유일한 낙이{야|에요}", 2, False),
        ("{thing} {mod} 순간이 {adv} 행복해{|요}", 2, False),
        ("요즘 {thing} 덕분에 {adv} {fposnow}{|요}", 2, False),
        ("{time} 오랜만에 {with} 시간 보내서 {adv} {fpos}{|요}", 2, False),
        ("{thing} 생각만 해도 기분이 좋아져{|요}", 2, False),
        ("솔직히 {thing} {mod} 날만 기다리면서 살아{|요}", 2, False),
    ],
    FEEL_NEG: [
        ("요즘 {worry} 때문에 {adv} {fnegnow}{|요}", 2, False), ("솔직히 {time} {adv} {fneg}{|요}", 2, False),
        ("{worry} 생각하면 {adv} 막막해{|요}", 2, False), ("{time} {with} 싸워서 {adv} {fneg}{|요}", 2, False),
        ("가끔 혼자 있으면 {adv} 외로워{|요}", 2, False), ("{worry} 때문에 잠을 잘 못 자{|요}", 2, False),
        ("사실 {time} {worry} 때문에 울었어{|요}", 2, False), ("요즘 아무것도 하기 싫고 {fnegnow}{|요}", 2, False),
        ("{time} {thing} {paststem}는데 {adv} {fneg}{|요}", 2, False),
    ],
    ONTOPIC: [
        ("{나}도 {thing} {adv} 좋아해{|요}", 1, False), ("{나}도 {time} {thing} {past}{|요}", 1, False),
        ("{thing} {나}도 {try}어{|요}", 1, False), ("{thing/은} {나}도 자주 {pres}{|요}", 1, False),
        ("{thing} 얘기하니까 {want}{|요}", 1, False), ("{thing} 하면 {나}는 {thing2/이} 먼저 생각나{|요}", 1, False),
        ("오 {thing}! {나}도 {thing} {mod} 거 좋아해{|요}", 1, False),
        ("{thing/은} 아직 안 {try}는데 궁금하긴 해{|요}", 1, False),
        ("{thing} {나}도 {adv} 좋아해서 {thing} 얘기하면 설레{|요}", 2, False),
        ("{나}는 {thing}보다 {thing2/이} 더 좋아{|요}", 1, False), ("{thing/은} 매일 {pres}{|요}", 1, False),
    ],
    ANSWER: [
        ("{응|네} {thing} {past}{|요}", 1, False), ("음 {thing}?", 1, False), ("{thing/이} 제일 좋아{|요}", 1, False),
        ("딱히 없는데 굳이 고르자면 {thing}?", 1, False), ("{아니|아니요} 아직 안 {try}어{|요}", 1, False),
        ("{응|네} 자주 {pres}{|요}", 1, False), ("{나}는 {thing/을} {adv} 좋아해{|요}", 1, False),
        ("{time} {with} {thing} {past}{|요}", 1, False), ("{내} 최애는 {thing/이야}", 1, False),
        ("{thing} {mod} 거 좋아해서 자주 {pres}{|요}", 1, False),
        ("{thing} {mod} 시간이 {내} 유일한 낙이{야|에요}", 2, False),
    ],
    QUESTION: [
        ("{너는|} {thing} 좋아해{|요}?", 0, True), ("{time} {what} {past}{|요}?", 0, True),
        ("{thing} {try}어{|요}?", 0, True), ("요즘 자주 {mod} {cat/이} 뭐{야|예요}?", 0, True),
        ("제일 좋아하는 {cat/은} 뭐{야|예요}?", 0, True), ("{주말에 뭐 할 거야?|주말에 뭐 하실 거예요?}", 0, True),
        ("{너는|} {cat} 중에 뭐 좋아해{|요}?", 0, True), ("{thing} 어때{|요}?", 0, True),
        ("혹시 {thing} 좋아해{|요}?", 0, True), ("{지금 뭐 하고 있어?|지금 뭐 하고 계세요?}", 0, True),
        ("{점심은 뭐 먹었어?|점심은 뭐 드셨어요?}", 0, True), ("{너는|} 어디 살아{|요}?", 0, True),
        ("{무슨 일 해?|무슨 일 하세요?}", 0, True), ("{thing/이랑} {thing2} 중에 뭐가 더 좋아{|요}?", 0, True),
        ("{너는|} {thing} {mod} 거 좋아해{|요}?", 0, True), ("{time} 뭐 했어{|요}?", 0, True),
        ("{나}는 {thing} 좋아하는데 {너는|} 뭐 좋아해{|요}?", 1, True),
        ("{나}는 {time} {thing} {paststem}는데 {너는|} 뭐 했어{|요}?", 1, True),
        ("{나}는 요즘 {thing}에 빠졌는데 {너는|} 요즘 뭐에 빠져 있어{|요}?", 1, True),
        ("{나}는 {city} 사는데 {너는|} 어디 살아{|요}?", 1, True),
        ("{나}는 {job}인데 {무슨 일 해?|무슨 일 하세요?}", 1, True),
        ("{나}는 {with} {thing} 자주 {mod}데 {너는|} 누구랑 {pres}{|요}?", 1, True),
        ("{나}는 {cat} 중에 {thing/이} 제일 좋은데 {너는|} 어때{|요}?", 1, True),
    ],
    FOLLOWUP: [
        ("{thing/은} 어땠어{|요}?", 0, True), ("누구랑 {past}{|요}?", 0, True), ("어디서 {past}{|요}?", 0, True),
        ("그래서 어떻게 됐어{|요}?", 0, True), ("{thing} 자주 {pres}{|요}?", 0, True),
        ("{thing} 왜 좋아해{|요}?", 0, True), ("{thing} 말고 또 뭐 좋아해{|요}?", 0, True),
        ("언제부터 {thing} 좋아했어{|요}?", 0, True), ("{thing} 추천해 줄 만한 거 있어{|요}?", 0, True),
        ("{thing/은} 다음에 또 {pres}{|요}?", 0, True),
        ("{나}도 {thing} 좋아하는데 어디서 {past}{|요}?", 1, True),
        ("{나}도 {thing} {try}는데 {너는|} 어땠어{|요}?", 1, True),
        ("{나}는 {thing} {mod} 거 좋아하는데 {너는|} 얼마나 자주 {pres}{|요}?", 1, True),
    ],
    FOLLOWUP_FEEL: [
        ("{많이 힘들었어?|많이 힘드셨어요?}", 0, True), ("{지금은 좀 괜찮아?|지금은 좀 괜찮으세요?}", 0, True),
        ("무슨 일 있었어{|요}?", 0, True), ("{내}가 뭐 도와줄 건 없어{|요}?", 0, True),
        ("얘기 좀 더 해 줄 수 있어{|요}?", 0, True), ("{뭐가 제일 좋았어?|뭐가 제일 좋으셨어요?}", 0, True),
        ("{그때 기분이 어땠어?|그때 기분이 어떠셨어요?}", 0, True),
    ],
    SUGGEST: [
        ("다음에 같이 {thing} {purp} 갈래{|요}?", 0, True), ("{thing} 꼭 {pres} 봐{|요}!", 0, True),
        ("{너도|} {thing} 한번 {pres} 봐{|요} {adv} 추천해{|요}", 0, True),
        ("우리 {thing} 얘기 더 {하자|해요}!", 0, True), ("같이 {thing} {purp} {가자|가요}!", 0, True),
        ("{thing} 좋아하면 {thing2}도 {pres} 봐{|요}!", 0, True), ("{thing} 같이 {pres} 보는 거 어때{|요}?", 0, True),
        ("{나}는 {thing} {adv} 좋아하는데 같이 {purp} {가자|가요}!", 1, True),
        ("{내}가 아는 {thing} 맛집 있는데 다음에 같이 갈래{|요}?", 1, True),
        ("{나}는 {with} 자주 {thing} {mod}데 {너도|} 같이 {pres}{|요}!", 1, True),
    ],
    REACT4_POS: [
        ("{우와 진짜 잘됐다!! 내가 다 기쁘네|우와 정말 잘됐네요!! 제가 다 기뻐요}", 0, False),
        ("{대박 완전 축하해|대박 진짜 축하드려요}", 0, False),
        ("{듣기만 해도 행복해진다|듣기만 해도 행복해지네요}", 0, False),
        ("{그 기분 뭔지 알아 진짜 좋았겠다|그 기분 뭔지 알아요 정말 좋으셨겠어요}", 1, False),
        ("{와 상상만 해도 설렌다|와 상상만 해도 설레요}", 0, False),
        ("{나도 그런 날 있었는데 진짜 행복하더라|저도 그런 날 있었는데 진짜 행복하더라고요}", 2, False),
        ("{너무 잘했다 진짜 멋있어|너무 잘하셨어요 진짜 멋있어요}", 0, False),
    ],
    REACT4_NEG: [
        ("{많이 힘들었겠다|많이 힘드셨겠어요}", 0, False), ("{진짜 속상했겠다|정말 속상하셨겠어요}", 0, False),
        ("{그 마음 완전 이해해|그 마음 충분히 이해돼요}", 0, False),
        ("{나도 그런 적 있어서 얼마나 힘든지 알아|저도 그런 적 있어서 얼마나 힘든지 알아요}", 1, False),
        ("{토닥토닥 고생 많았어|토닥토닥 고생 많으셨어요}", 0, False),
        ("{나도 요즘 비슷해서 그 마음 너무 잘 알아|저도 요즘 비슷해서 그 마음 너무 잘 알아요}", 1, False),
        ("{나도 예전에 그래서 많이 울었어|저도 예전에 그래서 많이 울었어요}", 2, False),
        ("{너무 무리하지 마 내가 응원할게|너무 무리하지 마세요 제가 응원할게요}", 0, False),
        ("{얘기해 줘서 고마워 마음이 아프다|얘기해 주셔서 고마워요 마음이 아프네요}", 0, False),
        ("{그럴 땐 푹 쉬는 게 최고야|그럴 땐 푹 쉬시는 게 최고예요}", 0, False),
    ],
    REACT3: [
        ("{아 그렇구나|아 그렇군요}", 0, False), ("{오 좋다|오 좋네요}", 0, False),
        ("{맞아 그럴 수 있지|맞아요 그럴 수 있죠}", 0, False), ("{와 부럽다|와 부러워요}", 0, False),
        ("{그랬구나|그러셨구나}", 0, False), ("{재밌었겠다|재밌었겠어요}", 0, False),
        ("오 {thing} {좋지|좋죠}", 0, False), ("{대박이다|대박이네요}", 0, False), ("{좋았겠다|좋았겠어요}", 0, False),
        ("{아 진짜 힘들었겠다|아 진짜 힘드셨겠어요}", 0, False), ("{그치 그런 날 있지|그쵸 그런 날 있죠}", 0, False),
        ("{헐 진짜?|헐 진짜요?}", 0, False), ("{우와 신기하다|우와 신기하네요}", 0, False),
        ("{나도 그래|저도 그래요}", 1, False), ("{나도 그거 좋아해|저도 그거 좋아해요}", 1, False),
        ("{나도 그런 적 있어|저도 그런 적 있어요}", 1, False), ("오 {나}도 {thing} 좋아해{|요}", 1, False),
        ("{맞아 나도 그렇게 생각해|맞아요 저도 그렇게 생각해요}", 1, False),
    ],
    REACT2: [
        ("{아 그래|아 그래요}", 0, False), ("{응|네}", 0, False), ("{ㅇㅇ|넵}", 0, False),
        ("{음 그렇구나|음 그렇군요}", 0, False), ("아하", 0, False), ("{그래?|그래요?}", 0, False), ("오..", 0, False),
        ("{그렇네|그렇네요}", 0, False), ("{그랬어?|그랬어요?}", 0, False), ("{흠 그럴 수도|흠 그럴 수도 있겠네요}", 0, False),
        ("{나도|저도요}", 1, False), ("{나는 잘 모르겠어|저는 잘 모르겠어요}", 1, False),
    ],
    REACT1: [
        ("{그게 뭐 대수라고|그게 뭐 대수라고요}", 0, False), ("{별로 관심 없는데|별로 관심 없는데요}", 0, False),
        ("{그건 네가 예민한 거 아니야?|그건 좀 예민하신 거 아니에요?}", 0, False), ("{그래서 뭐|그래서요}", 0, False),
        ("{그 정도는 다들 겪어|그 정도는 다들 겪어요}", 0, False),
        ("{그런 걸로 왜 그래|그런 걸로 왜 그러세요}", 0, False), ("{딴 얘기 하자|딴 얘기 해요}", 0, False),
    ],
    FILLER: [
        ("ㅋㅋㅋ", 0, False), ("ㅎㅎ", 0, False), ("ㅠㅠ", 0, False), ("헐", 0, False), ("와", 0, False), ("앗", 0, False),
        ("오오", 0, False), ("ㄷㄷ", 0, False), ("흠", 0, False), ("^^", 0, False), ("ㅋㅋㅋㅋㅋㅋ", 0, False),
        ("ㅎㅎㅎ", 0, False), ("헉", 0, False), ("음..", 0, False), ("ㅇㅋ", 0, False), ("ㅋㅋㅋㅋ", 0, False),
    ],
    CLOSING: [
        ("{오늘 얘기 즐거웠어|오늘 얘기 즐거웠어요}", 0, False), ("{다음에 또 얘기하자|다음에 또 얘기해요}", 0, False),
        ("{잘 자|안녕히 주무세요}", 0, False), ("{나 내일 출근이라 먼저 잘게|저 내일 출근이라 먼저 잘게요}", 1, False), ("{나 이제 가 봐야 할 것 같아|저 이제 가 봐야 할 것 같아요}", 0, False),
        ("{고마워 덕분에 재밌었어|고마워요 덕분에 재밌었어요}", 0, False),
        ("{내일 또 와|내일 또 와 주세요}", 0, False),
        ("{나 이제 자러 갈게|저 이제 자러 갈게요}", 1, False),
    ],
    STRANGE_ODD: [
        ("{우리|저희} 집 {odd/은} 목요일마다 노래를 불러{|요}", 1, False),
        ("갑자기 생각났는데 구름은 무슨 맛일까{|요}", 0, False),
        ("{odd/은} 사실 외계인이 만든 거래{|요}", 0, False),
        ("{time} {odd/이랑} 대화하다가 싸웠어{|요}", 1, False),
        ("{n} 더하기 {odd/은} 파란색이{야|에요}", 0, False),
        ("{thing/은} 원래 하늘을 나는 거 아니{야|에요}?", 0, True),
        ("{나}는 사실 {time} 달에 다녀왔어{|요}", 1, False),
        ("{odd/을} 먹으면 키가 줄어든대{|요}", 0, False),
        ("{thing/이} {내} 꿈에 나와서 주식 추천해 줬어{|요}", 1, False),
        ("수요일은 원래 냄새가 초록색이잖아{|요}", 0, False),
    ],
    STRANGE_CONTEXT: [
        ("{응 그럼 세 시에 만나|네 그럼 세 시에 만나요}", 0, False),
        ("{아 그 사람 말하는 거지?|아 그분 말씀하시는 거죠?}", 0, True),
        ("{고마워 너도 생일 축하해|고마워요 생일 축하드려요}", 0, False),
        ("{응 나도 방금 {city} 도착했어|네 저도 방금 {city} 도착했어요}", 1, False),
        ("{아니 그건 {thing2} 말고 {odd}였어|아니요 그건 {thing2} 말고 {odd}였어요}", 1, False),
        ("{그래서 {thing2}는 몇 시에 끝나?|그래서 {thing2}는 몇 시에 끝나요?}", 0, True),
    ],
    UNEASY: [
        ("{너 월급 얼마 받아?|월급 얼마 받으세요?}", 0, True), ("{몸무게 몇이야?|몸무게가 어떻게 되세요?}", 0, True),
        ("{그건 좀 한심한데|그건 좀 한심하네요}", 0, False), ("{그걸 왜 물어봐|그걸 왜 물어보세요}", 0, False),
        ("솔직히 {thing} 좋아하는 사람 이해 안 돼{|요}", 1, False),
        ("{나이 먹고 {thing} {mod} 건 좀 그렇지 않아?|나이 드시고 {thing} {mod} 건 좀 그렇지 않아요?}", 0, True),
        ("{애인은 왜 없어?|애인은 왜 없으세요?}", 0, True), ("{됐고 딴 얘기 해|됐고 딴 얘기 해요}", 0, False),
        ("{지루하다 진짜|지루하네요 진짜}", 0, False), ("{말 좀 짧게 해|말 좀 짧게 하세요}", 0, False),
        ("{너 좀 이상하다|좀 이상하시네요}", 0, False),
    ],
}

# --------------------------------------------------------------------------------------------
# Template compilation and rendering
# --------------------------------------------------------------------------------------------

_LIT, _SLOT, _ALT = 0, 1, 2
_PRONOUNS = {"나": ("나", "저"), "내": ("내", "제")}


def has_batchim(word: str) -> bool:
    """Whether the last syllable of `word` ends in a consonant (Latin letters and digits: no)."""
    if not word:
        return False
    last = word[-1]
    if "가" <= last <= "힣":
        return (ord(last) - 0xAC00) % 28 != 0
    return False


def _ends_in_rieul(word: str) -> bool:
    last = word[-1] if word else ""
    return "가" <= last <= "힣" and (ord(last) - 0xAC00) % 28 == 8


def attach(word: str, particle: str, polite: bool) -> str:
    """`word` followed by the form of `particle` that fits its last syllable."""
    b = has_batchim(word)
    if particle == "을":
        return word + ("을" if b else "를")
    if particle == "은":
        return word + ("은" if b else "는")
    if particle == "이":
        return word + ("이" if b else "가")
    if particle == "과":
        return word + ("과" if b else "와")
    if particle == "이랑":
        return word + ("이랑" if b else "랑")
    if particle == "이나":
        return word + ("이나" if b else "나")
    if particle == "으로":
        return word + ("으로" if b and not _ends_in_rieul(word) else "로")
    if particle == "이야":
        if polite:
            return word + ("이에요" if b else "예요")
        return word + ("이야" if b else "야")
    raise ValueError(f"unknown particle {particle!r}; allowed: 을 은 이 과 이랑 이나 으로 이야")


def _split_top(body: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(body):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == "|" and depth == 0:
            parts.append(body[start:i])
            start = i + 1
    parts.append(body[start:])
    return parts


def compile_template(text: str) -> tuple:
    """Parses a template into a tuple of parts: (LIT, str), (SLOT, name, particle), (ALT, banmal, polite)."""
    parts: list[tuple] = []
    i = 0
    while i < len(text):
        j = text.find("{", i)
        if j < 0:
            parts.append((_LIT, text[i:]))
            break
        if j > i:
            parts.append((_LIT, text[i:j]))
        depth, k = 0, j
        while True:
            if text[k] == "{":
                depth += 1
            elif text[k] == "}":
                depth -= 1
                if depth == 0:
                    break
            k += 1
        body = text[j + 1 : k]
        sides = _split_top(body)
        if len(sides) == 2:
            parts.append((_ALT, compile_template(sides[0]), compile_template(sides[1])))
        elif body in _PRONOUNS:
            parts.append((_ALT, ((_LIT, _PRONOUNS[body][0]),), ((_LIT, _PRONOUNS[body][1]),)))
        else:
            name, _, particle = body.partition("/")
            if name not in SLOT_NAMES:
                raise ValueError(f"template {text!r}: unknown slot {name!r}")
            parts.append((_SLOT, name, particle or None))
        i = k + 1
    return tuple(parts)


def slot_names(parts: tuple) -> tuple[str, ...]:
    """All slot names a compiled template uses (both speech levels), sorted.

    A sorted tuple, not a set: slots are filled in this order from the random stream, and set
    order changes with the interpreter's hash seed.
    """
    names: set[str] = set()
    for p in parts:
        if p[0] == _SLOT:
            names.add(p[1])
        elif p[0] == _ALT:
            names |= set(slot_names(p[1])) | set(slot_names(p[2]))
    return tuple(sorted(names))


def render(parts: tuple, values: dict[str, str], polite: bool) -> str:
    """Fills a compiled template; `values` maps slot names to strings."""
    out = []
    for p in parts:
        kind = p[0]
        if kind == _LIT:
            out.append(p[1])
        elif kind == _SLOT:
            v = values[p[1]]
            out.append(attach(v, p[2], polite) if p[2] else v)
        else:
            out.append(render(p[2] if polite else p[1], values, polite))
    return "".join(out)


@dataclass(frozen=True)
class Template:
    """One compiled template with the attribute values its wording implies."""

    parts: tuple
    slots: tuple[str, ...]
    self_level: int
    active: bool


TEMPLATES: tuple[tuple[Template, ...], ...] = tuple(
    tuple(
        Template(compile_template(text), slot_names(compile_template(text)), s, q) for text, s, q in _RAW[act]
    )
    for act in range(N_ACTS)
)
# templates of each act split by whether their wording discloses something (self >= 1)
BY_DISCLOSURE: tuple[tuple[tuple[Template, ...], tuple[Template, ...]], ...] = tuple(
    (tuple(t for t in ts if t.self_level == 0), tuple(t for t in ts if t.self_level > 0)) for ts in TEMPLATES
)
# for acts with both kinds: the probability of a disclosing wording (others: uniform over all)
DISCLOSING_SHARE: dict[int, float] = {
    GREET: 0.5, RETURN: 0.5, QUESTION: 0.6, FOLLOWUP: 0.4, SUGGEST: 0.4, REACT4_POS: 0.3,
    REACT4_NEG: 0.3, REACT3: 0.55, REACT2: 0.4, CLOSING: 0.3,
}


def pick_template(rng: random.Random, act: int) -> Template:
    """A template of `act`; for mixed acts, disclosing with probability `DISCLOSING_SHARE[act]`."""
    share = DISCLOSING_SHARE.get(act)
    if share is None:
        return rng.choice(TEMPLATES[act])
    return rng.choice(BY_DISCLOSURE[act][1 if rng.random() < share else 0])


# --------------------------------------------------------------------------------------------
# Chat noise
# --------------------------------------------------------------------------------------------

_EMOTICONS = ("^^", "♡", ":)", "~~", "^_^", "><", "ㅎ_ㅎ", "!!", "ㅎ.ㅎ", "♥", ":D", "~")
_CRY = ("ㅠㅠ", "ㅜㅜ", "ㅠ.ㅠ", "ㅠㅠㅠ", "ㅜ", "ㅠ", "ㅠㅠㅠㅠ")


def pause_text(hours: int) -> str:
    """The text of a pause sentence declaring a gap of `hours` hours (`1시간 후`, `하루 후`, ...)."""
    if hours < 24:
        return f"{hours}시간 후"
    days = hours // 24
    return {1: "하루 후", 2: "이틀 후", 3: "사흘 후", 7: "일주일 후"}.get(days, f"{days}일 후")


def add_noise(
    text: str,
    rnd: Callable[[], float],
    rng: random.Random,
    *,
    engage: bool,
    sad: bool,
    laugh: str,
    laugh_rate: float,
    cute: bool,
) -> str:
    """Adds chat noise to a rendered sentence; markers of liveliness are likelier when `engage`.

    Laughter runs, crying runs, emoticons, exclamation marks, cute endings (요 -> 용), dropped or
    doubled spaces, leading/trailing spaces and, rarely, a lost character written as `_`.
    """
    s = text
    if cute and s.endswith("요") and rnd() < 0.4:
        s = s[:-1] + "용"
    if s.endswith("?"):
        if rnd() < 0.12:
            s = s[:-1]
    elif rnd() < (0.32 if engage else 0.06):
        s += "!" * (1 + int(rnd() * 3))
    elif rnd() < 0.1:
        s += (".", "..", "...", "~")[int(rnd() * 4)]
    if rnd() < (0.42 if engage else 0.12) * laugh_rate * (0.2 if sad else 1.0):
        run = laugh * (2 + int(rnd() * 7)) if laugh in "ㅋㅎ" else laugh
        s += (" " if rnd() < 0.5 else "") + run
    if sad and rnd() < 0.55:
        s += (" " if rnd() < 0.5 else "") + _CRY[int(rnd() * len(_CRY))]
    if rnd() < (0.12 if engage else 0.03):
        s += " " + _EMOTICONS[int(rnd() * len(_EMOTICONS))]
    r = rnd()
    if r < 0.08 and " " in s:
        idx = [i for i, ch in enumerate(s) if ch == " "]
        k = idx[int(rnd() * len(idx))]
        s = s[:k] + s[k + 1 :]
    elif r < 0.09 and " " in s:
        k = s.index(" ")
        s = s[:k] + " " + s[k:]
    elif r < 0.095:
        s = " " + s
    elif r < 0.105:
        s = s + " "
    if rnd() < 0.003 and len(s) > 3:
        k = 1 + int(rnd() * (len(s) - 2))
        s = s[:k] + "_" + s[k:]
    return s
