"""The rack's fabric test: nodes talking to each other (issue #20).

record.py holds what a fabric run measured (the `fabric.json` evidence); localize.py
decides from it which node or link is at fault; stage.py runs it over SSH.
"""
