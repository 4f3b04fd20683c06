"""What the tests share: object builders (builders.py), bounded waits and loopback servers
(waiting.py), reads of the bed through the kubernetes client (kube.py), the stock runtimes
(stock_runtimes.py) and the MultiKueue driver of the end-to-end tests (multikueue.py)."""
