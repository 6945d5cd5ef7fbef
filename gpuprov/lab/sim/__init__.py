"""The simulated GPU tools the lab's stand-in packages install on nodes.

The stand-in driver package copies these modules onto nodes, where the node's own python3
runs them: stdlib and PyYAML only.
"""
