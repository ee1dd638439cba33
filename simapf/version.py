"""simapf's version: its own module, so that no module inside simapf imports the package's root
(whose lazy attributes import most of simapf) to learn it."""

__version__ = "0.1.0"
