"""The simulated GPU tools the lab's stand-in packages install on nodes.

Stdlib only: these modules are copied onto nodes and run by the node's own python3.
"""
