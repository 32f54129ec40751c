"""Traffic control: the split between backends, its actuators, guards, controller and capacity."""
