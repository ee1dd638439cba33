"""Comparing LIST policies on one scenario: identical random streams, replications, paired CIs.

    policies  parsing NAME[:k=v,...]
    core      `compare()` and the `Comparison` it returns
    stats     means, spreads, paired differences with t intervals
    text, figure  how a comparison is shown

The package is `comparison`, not `compare`, so that importing it never replaces the function
`simapf.compare` with a module.
"""

from simapf.comparison.core import Comparison, compare
from simapf.comparison.policies import Policy, parse_policy

__all__ = ["Comparison", "Policy", "compare", "parse_policy"]
