"""Every state change of a run, by noun (as Zulip's zerver/actions/): base (locks, events, state moves),
lifecycle, spending, observation, sweeps, redrive, stops. Import from the module that holds the verb."""
