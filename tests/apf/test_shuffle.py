"""Flow hashing and the shuffle-sharding dealer against the reference (§6.5) and upstream."""

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from simapf.apf.shuffle import (
    MAX_DECK_SIZE,
    MAX_HASH_BITS,
    deal_hand,
    flow_hash,
    required_entropy_bits,
    validate_dealer,
)

# Reference §6.5: hashes and hands printed by the real Go code.
VECTORS = [
    (
        "global-default",
        "alice",
        17644606172554983095,
        (55, 62, 126, 125, 105, 1),
        (55, 56, 51, 36, 11, 5),
    ),
    (
        "service-accounts",
        "system:serviceaccount:default:default",
        13424615363282033023,
        (127, 66, 18, 15, 64, 74),
        (63, 43, 6, 59, 8, 11),
    ),
    (
        "kube-controller-manager",
        "kube-system",
        1951360281921618776,
        (88, 53, 21, 91, 7, 17),
        (24, 23, 50, 62, 12, 43),
    ),
    ("global-default", "", 5449774753716172163, (3, 72, 82, 58, 1, 116), (3, 51, 29, 58, 1, 33)),
]


@pytest.mark.parametrize("fs_name, distinguisher, expected_hash, hand_128, hand_64", VECTORS)
def test_reference_vectors(fs_name, distinguisher, expected_hash, hand_128, hand_64):
    value = flow_hash(fs_name, distinguisher)
    assert value == expected_hash
    assert deal_hand(value, 128, 6) == hand_128
    assert deal_hand(value, 64, 6) == hand_64


def test_separator_keeps_name_and_distinguisher_apart():
    assert flow_hash("ab", "c") != flow_hash("a", "bc")


def test_hash_is_a_uint64():
    for fs_name, distinguisher, *_ in VECTORS:
        assert 0 <= flow_hash(fs_name, distinguisher) < 1 << 64


@given(
    hash_value=st.integers(min_value=0, max_value=(1 << 64) - 1),
    deck_and_hand=st.integers(min_value=1, max_value=512).flatmap(
        lambda deck: st.tuples(st.just(deck), st.integers(min_value=1, max_value=min(deck, 15)))
    ),
)
def test_hand_is_distinct_cards_from_the_deck(hash_value, deck_and_hand):
    deck, hand_size = deck_and_hand
    hand = deal_hand(hash_value, deck, hand_size)
    assert len(hand) == hand_size
    assert len(set(hand)) == hand_size
    assert all(0 <= card < deck for card in hand)


def test_small_deck_deals_every_permutation_exactly_once():
    # With deck 4 and hand 4 the hash digits are a mixed-radix number below 4*3*2*1 = 24, and
    # the dealer is a bijection from those numbers onto the permutations.
    hands = {deal_hand(value, 4, 4) for value in range(24)}
    assert hands == set(itertools.permutations(range(4)))


def test_first_card_is_hash_mod_deck():
    assert deal_hand(1000, 128, 1) == (1000 % 128,)


@pytest.mark.parametrize(
    "deck, hand, bits",
    [(128, 6, 42), (64, 6, 36), (16, 4, 16), (10_000_000, 2, 47), (3, 1, 2)],
)
def test_required_entropy_bits(deck, hand, bits):
    assert required_entropy_bits(deck, hand) == bits


@pytest.mark.parametrize(
    "deck, hand",
    [
        (1, 1),
        (128, 6),
        (16, 15),  # 4 bits x 15 = 60: exactly at the limit
        (1 << 20, 3),  # 60 bits again
        (10_000_000, 2),  # upstream validation test: accepted
        (MAX_DECK_SIZE, 2),
    ],
)
def test_dealer_accepts(deck, hand):
    validate_dealer(deck, hand)


@pytest.mark.parametrize(
    "deck, hand, fragment",
    [
        (0, 1, "positive"),
        (8, 0, "positive"),
        (7, 8, "greater than deck"),
        (512, 8, "72 bits"),  # upstream validation test case
        (128, 10, "70 bits"),  # upstream validation test case
        ((1 << 20) + 1, 3, "61 bits"),  # one card past the 60-bit edge
        (16, 16, "64 bits"),
        (MAX_DECK_SIZE + 1, 1, "maximum"),
    ],
)
def test_dealer_rejects(deck, hand, fragment):
    with pytest.raises(ValueError, match=fragment):
        validate_dealer(deck, hand)


def test_max_hash_bits_constant():
    assert MAX_HASH_BITS == 60
    assert MAX_DECK_SIZE == 2**26
