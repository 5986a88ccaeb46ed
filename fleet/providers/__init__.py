"""The providers' HTTP APIs beside the boxes they bill: `apis` says what each documented API is and
how its answers are read (pure); `calls` sends the calls (state, list, stop, release) with retries."""
