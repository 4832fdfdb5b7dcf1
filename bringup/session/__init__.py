"""The sessions that join the stages: a bring-up (run: the loop; settings, prepare, launching,
preempt, resume, recording, minimizing and result around it), who it is about (identity), the
memory plan checked launch by launch, bring-ups across a Ray cluster's node types (nodetypes),
and a tuning on launches (tuning, around bringup.tuning.session.TuneSession)."""
