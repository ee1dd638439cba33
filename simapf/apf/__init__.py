"""The APF core: kube-apiserver v1.37 priority and fairness as pure logic.

Nothing in this package imports SimPy or the server model. Time reaches it through a
`simapf.engine.clock.Clock`, in integer nanoseconds: the run's, or the replay's `EventLoop`.
"""
