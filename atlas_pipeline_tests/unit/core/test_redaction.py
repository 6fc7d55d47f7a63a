"""Every form of a secret an endpoint may echo is masked (issue #40): itself, URL-encoded, base64-encoded — alone, of
``Bearer <key>``, or inside longer base64 at any alignment — and any run of 8+ characters equal to its start."""

import base64
import random
import re
import timeit
from urllib.parse import quote, quote_plus

import pytest

from atlas_pipeline.core.redaction import MASK, redact, redact_value, secret_values

KEY = "sk-atlas/echo+test=d41d8cd98f00b204 ok"  # "/", "+", "=" and a space: each URL encoder differs
SECRETS = [KEY]


def masked(text: str) -> str:
    return redact(text, secrets=SECRETS)


def b64(data: bytes, urlsafe: bool = False) -> str:
    return (base64.urlsafe_b64encode if urlsafe else base64.b64encode)(data).decode()


def key_characters(blob: str, before: int, length: int) -> str:
    """The characters of a base64 text whose 6 bits all come from the ``length`` bytes after ``before`` bytes."""
    first, end = -(-8 * before // 6), 8 * (before + length) // 6
    return blob[first:end]


@pytest.mark.parametrize("urlsafe", [False, True])
@pytest.mark.parametrize("padded", [True, False])
@pytest.mark.parametrize("payload", [KEY.encode(), b"Bearer " + KEY.encode()], ids=["key", "bearer"])
def test_base64_of_the_key_or_of_its_bearer_header_is_masked(payload, padded, urlsafe):
    encoded = b64(payload, urlsafe)
    encoded = encoded if padded else encoded.rstrip("=")
    assert masked(f"credentials {encoded} refused") == f"credentials {MASK} refused"


@pytest.mark.parametrize("urlsafe", [False, True])
@pytest.mark.parametrize("before", range(9))  # 0, 1, 2 bytes into a 3-byte group, three times over
@pytest.mark.parametrize("after", [0, 1, 2, 5])
def test_the_key_inside_a_longer_base64_text_is_masked_at_every_alignment(before, after, urlsafe):
    payload = b'{"auth": "'[:before] + KEY.encode() + b'"}\n\x00\xff'[:after]
    blob = b64(payload, urlsafe)
    first, end = -(-8 * before // 6), 8 * (before + len(KEY)) // 6  # the characters carrying only the key's bits
    left, right = masked(f"state={blob}").split(MASK)
    # the characters carrying bits of the bytes around the key are left, and no more
    assert left == "state=" + blob[:first] and blob.endswith(right) and len(right) <= len(blob) - end


def test_the_key_in_random_base64_blobs_is_always_masked():
    rng = random.Random(40)
    for _ in range(300):
        before, after = rng.randbytes(rng.randrange(40)), rng.randbytes(rng.randrange(40))
        payload = rng.choice([KEY.encode(), b"Bearer " + KEY.encode()])
        blob = b64(before + payload + after, urlsafe=rng.random() < 0.5)
        assert key_characters(blob, len(before) + len(payload) - len(KEY), len(KEY)) not in masked(blob), blob


@pytest.mark.parametrize(
    "encoded",
    [
        quote(KEY, safe=""),
        quote(KEY),
        quote_plus(KEY),
        re.sub("%[0-9A-F]{2}", lambda m: m.group(0).lower(), quote(KEY, safe="")),
    ],
    ids=["quote-safe-empty", "quote-default", "quote-plus", "lower-case-hex"],
)
def test_url_encoded_forms_are_masked(encoded):
    assert masked(f"GET /v1/models?key={encoded}&x=1") == f"GET /v1/models?key={MASK}&x=1"


def test_the_url_encoders_give_different_forms_here():
    assert len({quote(KEY, safe=""), quote(KEY), quote_plus(KEY), KEY}) == 4


def test_base64_in_a_query_string_is_masked():
    encoded = quote(b64(KEY.encode()), safe="")
    assert "%" in encoded and masked(f"?token={encoded}") == f"?token={MASK}"


@pytest.mark.parametrize("length", [8, 9, 12, 20, len(KEY) - 1, len(KEY)])
def test_a_run_of_8_or_more_characters_equal_to_the_start_of_the_key_is_masked_whole(length):
    assert masked(f"key '{KEY[:length]}' unknown") == f"key '{MASK}' unknown"
    # the run ends where the text stops being the key: the next character is kept
    assert masked(f"key {KEY[:length]}#") == f"key {MASK}#"


def test_seven_characters_of_the_start_are_left():
    assert masked(f"key {KEY[:7]} unknown") == f"key {KEY[:7]} unknown"
    assert masked(KEY[:7]) == KEY[:7]


def test_a_prefix_followed_by_other_text_masks_only_the_common_run():
    assert masked(KEY[:12] + "ZZZZ") == MASK + "ZZZZ"
    assert masked("x" + KEY[:10] + KEY[:8]) == "x" + MASK + MASK


def test_the_longest_run_is_masked_when_secrets_share_a_start():
    other = "sk-atlas/echo+other-0000"
    assert redact(f"a {KEY[:20]} b {other} c", secrets=[KEY, other]) == f"a {MASK} b {MASK} c"


def test_a_secret_shorter_than_8_is_masked_only_whole():
    secrets = secret_values({"ATLAS_LLM_API_KEY": "q7#Zp2x", "ATLAS_OTHER_TOKEN": "short"})
    assert secrets == ["q7#Zp2x"]  # shorter than MIN_SECRET_LENGTH: never a secret
    assert redact("pw q7#Zp2x!", secrets=secrets) == f"pw {MASK}!"
    assert redact("pw q7#Zp2 and q7#Z", secrets=secrets) == "pw q7#Zp2 and q7#Z"
    assert redact("pw q7%23Zp2x", secrets=secrets) == f"pw {MASK}"
    assert redact(f"pw {b64(b'q7#Zp2x')}", secrets=secrets) == f"pw {MASK}"


def test_ordinary_text_is_untouched():
    texts = [
        "White Grape Juice",
        "The duration of the illness was longer in the infants fed juice (p = 0.006)",
        "sk-atla",
        "c2stYXRs",  # base64 of "sk-atl": too little of the key to say
        "https://example.org/v1/chat/completions?x=%2F",
        "QmVhcmVyIA==",  # base64 of "Bearer "
        "",
        "30",
    ]
    for text in texts:
        assert masked(text) == text


def test_bearer_tokens_and_literal_keys_are_still_masked():
    assert masked(f"Invalid request for credentials Bearer {KEY}") == f"Invalid request for credentials Bearer {MASK}"
    assert redact("Authorization: Bearer abcdefghijklmnopqrstuvwxyz", secrets=[]) == f"Authorization: Bearer {MASK}"


def test_the_secrets_are_read_from_the_environment(monkeypatch):
    monkeypatch.setenv("ATLAS_LLM_API_KEY", KEY)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLEID0000")  # an identifier, not a secret
    assert KEY in secret_values() and "AKIAEXAMPLEID0000" not in secret_values()
    assert redact(f"{b64(KEY.encode())} AKIAEXAMPLEID0000") == f"{MASK} AKIAEXAMPLEID0000"
    assert redact_value({"a": [KEY[:12], 3], "b": quote(KEY, safe="")}) == {"a": [MASK, 3], "b": MASK}


def test_a_key_of_regular_expression_characters_is_found_literally():
    key = "(a+)*[b]{2}.?$^|\\d"
    assert redact(f"x {key} y {b64(key.encode())} aaaaaaaa", secrets=[key]) == f"x {MASK} y {MASK} aaaaaaaa"


def test_a_long_secret_builds_and_masks(monkeypatch):
    token = "IQoJb3JpZ2luX2Vj" + "A" * 1200  # the size of an AWS session token
    assert redact(f"t={token[:400]}.", secrets=[token]) == f"t={MASK}."


def test_redacting_stays_cheap():
    secrets = [KEY, "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "pg-Secret!2024"]
    texts = ["30", "White Grape Juice", "completeness 100%; every value verified or not reported"] * 1000
    took = min(timeit.repeat(lambda: [redact(text, secrets=secrets) for text in texts], number=1, repeat=3))
    assert took < 0.5, took  # ~5 ms on a laptop; a pattern gone quadratic or uncached takes seconds


def test_the_masked_text_holds_no_form():
    text = " ".join([KEY, quote(KEY), b64(KEY.encode()), b64(b"Bearer " + KEY.encode(), urlsafe=True), KEY[:9]])
    result = masked(text)
    assert re.fullmatch(r"(\*\*\*\s?)+", result), result


def test_the_key_in_upper_or_lower_case_is_masked():
    assert masked(f"got {KEY.upper()} and {KEY.lower()}") == f"got {MASK} and {MASK}"


@pytest.mark.parametrize("lower", [False, True])
@pytest.mark.parametrize("before", range(10))  # 0 to 4 bytes into a 5-byte group, twice over
def test_the_key_in_base32_is_masked_at_every_alignment(before, lower):
    blob = base64.b32encode(b"token:    "[:before] + KEY.encode() + b"!").decode()
    blob = blob.lower() if lower else blob
    first, end = -(-8 * before // 5), 8 * (before + len(KEY)) // 5  # the characters carrying only the key's bits
    assert blob[first:end] not in masked(f"b32={blob}") and MASK in masked(f"b32={blob}")
    assert masked(base64.b32encode(KEY.encode()).decode()) == MASK


@pytest.mark.parametrize("width", [76, 64, 20])
@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_the_key_in_base64_broken_into_lines_is_masked(width, newline):
    """MIME's 76-character lines (``base64.encodebytes``), PEM's 64: a form broken across lines is still found."""
    blob = b64(b'{"headers": {"Authorization": "Bearer ' + KEY.encode() + b'"}, "x": "' + b"y" * 90 + b'"}')
    wrapped = newline.join(blob[start : start + width] for start in range(0, len(blob), width))
    text = masked(f"echo:{newline}{wrapped}{newline}end")
    assert MASK in text and text.endswith(f"{newline}end") and text.startswith(f"echo:{newline}")
    joined = text.replace("\r", "").replace("\n", "")
    assert key_characters(blob, len(b'{"headers": {"Authorization": "Bearer '), len(KEY)) not in joined
    innocent = newline.join(["QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo=", "MDEyMzQ1Njc4OQ=="])
    assert masked(innocent) == innocent  # base64 lines that hold no key stay as they were
