// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package gpuscenario // import "github.com/otelcol-gpu/otelcol-gpu/internal/gpuscenario"

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// smiLog is the part of `nvidia-smi -q -x` (nvsmi_device_v*.dtd) a capture replays.
type smiLog struct {
	XMLName xml.Name `xml:"nvidia_smi_log"`
	GPUs    []smiGPU `xml:"gpu"`
}

type smiGPU struct {
	ProductName string `xml:"product_name"`
	UUID        string `xml:"uuid"`
	PCI         struct {
		BusID    string `xml:"pci_bus_id"`
		DeviceID string `xml:"pci_device_id"`
	} `xml:"pci"`
	FBMemory struct {
		Total string `xml:"total"`
	} `xml:"fb_memory_usage"`
	MaxClocks struct {
		SM  string `xml:"sm_clock"`
		Mem string `xml:"mem_clock"`
	} `xml:"max_clocks"`
	// Drivers before 530 print power_readings, later ones gpu_power_readings.
	PowerReadings    smiPower `xml:"power_readings"`
	GPUPowerReadings smiPower `xml:"gpu_power_readings"`
}

type smiPower struct {
	Min string `xml:"min_power_limit"`
	Max string `xml:"max_power_limit"`
}

// maxCapturedGPUs bounds a capture to what one node holds.
const maxCapturedGPUs = 64

// ParseNvidiaSMI reads the GPUs of an `nvidia-smi -q -x` dump, in its order (NVML's index
// order). Each needs a product name, a UUID, a PCI bus id and its framebuffer's size; clocks
// and power limits may be N/A. Errors name the element, as gpu[1].fb_memory_usage.total.
func ParseNvidiaSMI(data []byte) ([]CapturedGPU, error) {
	var log smiLog
	dec := xml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&log); err != nil {
		return nil, fmt.Errorf("nvidia_smi_log: %w", err)
	}
	if len(log.GPUs) == 0 || len(log.GPUs) > maxCapturedGPUs {
		return nil, fmt.Errorf("nvidia_smi_log: want 1 to %d gpu elements, got %d", maxCapturedGPUs, len(log.GPUs))
	}
	gpus := make([]CapturedGPU, 0, len(log.GPUs))
	var errs []error
	seen := map[string]int{}
	for i := range log.GPUs {
		c, gpuErrs := log.GPUs[i].captured(fmt.Sprintf("gpu[%d]", i))
		errs = append(errs, gpuErrs...)
		if first, dup := seen[c.UUID]; dup && len(gpuErrs) == 0 {
			errs = append(errs, fmt.Errorf("gpu[%d].uuid: %s is gpu[%d]'s too", i, c.UUID, first))
		}
		seen[c.UUID] = i
		gpus = append(gpus, c)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return gpus, nil
}

// captured reads the GPU of element key, gpu[i].
func (g *smiGPU) captured(key string) (CapturedGPU, []error) {
	c := CapturedGPU{Model: strings.TrimSpace(g.ProductName), UUID: strings.TrimSpace(g.UUID)}
	var errs []error
	fail := func(element string, err error) { errs = append(errs, fmt.Errorf("%s.%s: %w", key, element, err)) }
	if c.Model == "" || c.Model == notAvailable {
		fail("product_name", errors.New("missing"))
	}
	if !strings.HasPrefix(c.UUID, "GPU-") {
		fail("uuid", fmt.Errorf("want GPU-…, got %q", c.UUID))
	}
	var err error
	if c.PCI, err = parseNvidiaBusID(g.PCI.BusID); err != nil {
		fail("pci.pci_bus_id", err)
	}
	if id := strings.TrimSpace(g.PCI.DeviceID); id != "" {
		v, err := strconv.ParseUint(id, 16, 32)
		if err != nil {
			fail("pci.pci_device_id", fmt.Errorf("want 8 hex digits, got %q", id))
		}
		c.PCIDeviceID = uint32(v)
	}
	if mib, ok, err := quantity(g.FBMemory.Total, "MiB", 1<<30); err != nil || !ok {
		fail("fb_memory_usage.total", orMissing(err))
	} else {
		c.MemoryMiB = mib
	}
	power, powerElement := g.GPUPowerReadings, "gpu_power_readings"
	if power == (smiPower{}) {
		power, powerElement = g.PowerReadings, "power_readings"
	}
	// What may be N/A keeps the profile's value.
	optional := []struct {
		element, text, unit string
		dst                 *uint32
	}{
		{"max_clocks.sm_clock", g.MaxClocks.SM, "MHz", &c.MaxSMClockMHz},
		{"max_clocks.mem_clock", g.MaxClocks.Mem, "MHz", &c.MaxMemClockMHz},
		{powerElement + ".min_power_limit", power.Min, "W", &c.PowerMinW},
		{powerElement + ".max_power_limit", power.Max, "W", &c.PowerMaxW},
	}
	for _, o := range optional {
		v, _, err := quantity(o.text, o.unit, maxClockOrWatts)
		if err != nil {
			fail(o.element, err)
		}
		*o.dst = uint32(v)
	}
	if c.PowerMinW > c.PowerMaxW {
		fail(powerElement, fmt.Errorf("min_power_limit %d W is above max_power_limit %d W", c.PowerMinW, c.PowerMaxW))
	}
	return c, errs
}

// maxClockOrWatts bounds a clock in MHz and a power limit in W.
const maxClockOrWatts = 100_000

// notAvailable is what nvidia-smi prints for a value the GPU does not report.
const notAvailable = "N/A"

func orMissing(err error) error {
	if err == nil {
		return errors.New("missing")
	}
	return err
}

// quantity reads "<number> <unit>" (power limits have decimals: "175.00 W", rounded to whole
// units), below limit; ok false for N/A or an absent element.
func quantity(text, unit string, limit uint64) (v uint64, ok bool, err error) {
	text = strings.TrimSpace(text)
	if text == "" || text == notAvailable {
		return 0, false, nil
	}
	number, found := strings.CutSuffix(text, " "+unit)
	f, parseErr := strconv.ParseFloat(number, 64)
	if !found || parseErr != nil || !(f >= 0 && f < float64(limit)) {
		return 0, false, fmt.Errorf("want a number of %s below %d, got %q", unit, limit, text)
	}
	return uint64(f + 0.5), true, nil
}

// parseNvidiaBusID reads NVML's bus id, 00000000:01:00.0 (a 32-bit domain: Azure's VMs use all
// of it).
func parseNvidiaBusID(s string) (PCIAddress, error) {
	s = strings.TrimSpace(s)
	domain, rest, ok1 := strings.Cut(s, ":")
	bus, rest, ok2 := strings.Cut(rest, ":")
	device, function, ok3 := strings.Cut(rest, ".")
	if ok1 && ok2 && ok3 && len(domain) <= 8 && len(bus) == 2 && len(device) == 2 && len(function) == 1 {
		d, err1 := strconv.ParseUint(domain, 16, 32)
		b, err2 := strconv.ParseUint(bus, 16, 8)
		v, err3 := strconv.ParseUint(device, 16, 5)
		f, err4 := strconv.ParseUint(function, 16, 3)
		if err := errors.Join(err1, err2, err3, err4); err == nil {
			return PCIAddress{Domain: uint32(d), Bus: uint8(b), Device: uint8(v), Function: uint8(f)}, nil
		}
	}
	return PCIAddress{}, fmt.Errorf("want <domain>:<bus>:<device>.<function>, got %q", s)
}
