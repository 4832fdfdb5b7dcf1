"""The search for a working configuration: evidence, beliefs and proposal (docs/search.md).

``Strategy`` (strategy.py) is the one place where the next launch is decided; ``evidence`` reads
what a failed launch names, ``beliefs`` keeps a posterior over each distinct failure's culprits,
``proposal`` grows the next candidate from the configurations that got furthest.
"""

from bringup.search.proposal import Proposal
from bringup.search.strategy import Decision, Observation, Strategy

__all__ = ["Decision", "Observation", "Proposal", "Strategy"]
