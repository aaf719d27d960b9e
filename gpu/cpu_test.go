package gpu

// cpuOf returns the CPU engine of a learner made without a device.
func cpuOf(l *Learner) *cpuEngine { return l.eng.(*cpuEngine) }

// cpuModelOf returns the CPU engine of a model.
func cpuModelOf(m *Model) *cpuModel { return m.eng.(*cpuModel) }
