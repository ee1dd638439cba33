"""What simapf writes for people and other tools from a run: its directory, figures, exports."""

# The formats `simapf export` writes (simapf.outputs.export). Here, free of imports, so that the
# command line can offer them without loading pandas.
FORMATS = ("openmetrics", "perfdata")
