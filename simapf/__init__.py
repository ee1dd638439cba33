"""simapf: a discrete-event simulator of kube-apiserver memory and CPU under API Priority and Fairness."""

__version__ = "0.1.0"
