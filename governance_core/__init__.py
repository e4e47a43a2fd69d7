"""Record runs of software agents and govern them: the embeddable core."""
