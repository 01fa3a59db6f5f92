"""Where responses are scored: a local process pool of browser workers (`pool`, the
default) or Ray actors on a cluster (`ray_fleet`); workers localize the records they
produce when the trainer asks (`evaluators.localize.api.Localizer`)."""
