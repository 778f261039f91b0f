import pytest

from toolbench_lib.data.normalize import norm_name, strip_version


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("Yahoo Finance_v2", "yahoofinance"),
        ("Yahoo Finance", "yahoofinance"),
        ("QR Code API_v67", "qrcodeapi"),
        ("get_user-Info ", "getuserinfo"),
        ("👋 Onboarding Project", "onboardingproject"),
        ("flights/auto-complete", "flightsautocomplete"),
        ("", ""),
        (None, ""),
        ("v2_api", "v2api"),  # only a trailing _vN is a version suffix
    ],
)
def test_norm_name(raw, expected):
    assert norm_name(raw) == expected


def test_strip_version_and_key():
    assert strip_version("Dad Jokes_v2") == "Dad Jokes"
    assert strip_version("Dad Jokes_v2x") == "Dad Jokes_v2x"
