"""The group coordinator: consumer groups of Kafka's classic protocol and their committed offsets.

``coordinator`` is the state machine, ``group`` its data, ``records`` the ``__consumer_offsets``
record formats, ``timers`` its deadlines, ``messages`` what goes in and out, and ``runtime`` the
part that lives in a broker (the offsets topic, the timer task, the offsets partitions owned as
this broker leads them, and when answers may leave).
"""
