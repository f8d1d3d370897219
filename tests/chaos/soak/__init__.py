"""The chaos soak (``horae chaos``): a driver that runs the whole system on a private stack and
breaks it (:mod:`.driver`), a loopback webhook receiver (:mod:`.receiver`), and a checker that
shares no code with the processes (:mod:`.check`, :mod:`.avro`)."""
