"""Game-day drills: scenario model, engine (phases, clock), persisted run state, reports."""
