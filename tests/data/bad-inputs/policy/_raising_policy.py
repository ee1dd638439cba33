import os

TOKEN = os.environ["SIMAPF_CORPUS_NO_SUCH_VARIABLE"]
