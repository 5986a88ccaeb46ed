"""Every state change of a run, by noun (as Zulip's zerver/actions/): base (locks, events, state moves),
lifecycle, spending, observation, sweeps, redrive, stops, checkpoints (a probe's mirror state), moves
(continue on another box). Import from the module that holds the verb."""
