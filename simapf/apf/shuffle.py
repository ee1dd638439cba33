"""Flow identity and shuffle sharding: which queues a flow may use.

A flow is (FlowSchema name, distinguisher). Its 64-bit hash picks a "hand" of `hand_size`
distinct queues out of a "deck" of `deck_size` queues, the same hand every time, so one noisy
flow can only crowd the queues of its own hand (reference §1.1 and §6.5; upstream
`hashFlowID` in apf_controller.go and `Dealer` in AS/pkg/util/shufflesharding).
"""

from __future__ import annotations

import hashlib
import math

# Only this many bits of the hash are meant to be consumed: using all 64 would make the last
# card noticeably uneven (upstream's MaxHashBits).
MAX_HASH_BITS = 60

# Upstream refuses larger decks as impractical.
MAX_DECK_SIZE = 1 << 26

_SEPARATOR = b"\x00"


def flow_hash(flow_schema_name: str, distinguisher: str) -> int:
    """The flow's 64-bit hash: SHA-256(name, 0x00, distinguisher), first 8 bytes little-endian.

    The zero byte keeps ("ab", "c") and ("a", "bc") apart.
    """
    digest = hashlib.sha256(
        flow_schema_name.encode() + _SEPARATOR + distinguisher.encode()
    ).digest()
    return int.from_bytes(digest[:8], "little")


def required_entropy_bits(deck_size: int, hand_size: int) -> int:
    """A slightly conservative count of hash bits a deal consumes: ceil(log2(deck) * hand).

    Upstream computes this in float64; for any deck that is not a power of two the product is
    far (relative to float rounding) from an integer, so Python's log2 gives the same ceiling.
    """
    return math.ceil(math.log2(deck_size) * hand_size)


def dealer_problem(deck_size: int, hand_size: int) -> str | None:
    """Why upstream would refuse to build a dealer for these sizes, or None if it would not."""
    if deck_size <= 0 or hand_size <= 0:
        return f"deck size {deck_size} and hand size {hand_size} must both be positive"
    if hand_size > deck_size:
        return f"hand size {hand_size} is greater than deck size {deck_size}"
    if deck_size > MAX_DECK_SIZE:
        return f"deck size {deck_size} is greater than the maximum {MAX_DECK_SIZE}"
    bits = required_entropy_bits(deck_size, hand_size)
    if bits > MAX_HASH_BITS:
        return (
            f"deck size {deck_size} and hand size {hand_size} need {bits} bits of hash, "
            f"more than {MAX_HASH_BITS}"
        )
    return None


def validate_dealer(deck_size: int, hand_size: int) -> None:
    """Raise ValueError if upstream's NewDealer would reject these sizes."""
    problem = dealer_problem(deck_size, hand_size)
    if problem is not None:
        raise ValueError(problem)


def deal_hand(hash_value: int, deck_size: int, hand_size: int) -> tuple[int, ...]:
    """Deal `hand_size` distinct cards from 0..deck_size-1, driven by `hash_value`.

    Mixed-radix digits of the hash (radix deck, deck-1, ...) choose among the cards still in
    the deck; each raw digit is then shifted past the cards already dealt. The shift compares
    against the earlier raw digits from the most recent back to the first, exactly as upstream
    does; a different order would deal different hands. Sizes are not checked here (this runs
    for every request): validate them once with `validate_dealer`.
    """
    digits = [0] * hand_size
    radix = deck_size
    for i in range(hand_size):
        hash_value, digits[i] = divmod(hash_value, radix)
        radix -= 1
    # Convert in place from the last card back, so every card still sees the raw digits of
    # the cards before it.
    for i in range(hand_size - 1, 0, -1):
        card = digits[i]
        for j in range(i - 1, -1, -1):
            if card >= digits[j]:
                card += 1
        digits[i] = card
    return tuple(digits)
