"""The build stages: plan (pure), materialize (fetch, compile, unpack), injection, sharing, audit; pipeline runs them."""
