// Copyright The otelcol-gpu Authors
// SPDX-License-Identifier: Apache-2.0

package taskreceiver // import "github.com/otelcol-gpu/otelcol-gpu/receiver/taskreceiver"

import (
	"errors"
	"io/fs"
	"maps"
	"slices"
	"strconv"

	"github.com/prometheus/procfs/sysfs"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/scraper/scrapererror"

	"github.com/otelcol-gpu/otelcol-gpu/receiver/taskreceiver/internal/metadata"
)

// gbpsToBytes turns the kernel's Gb/s into node_exporter's bytes per second, as procfs does.
const gbpsToBytes = 125_000_000

// scrapeInfiniBand reports every port of every RDMA device (InfiniBand and RoCE alike) with
// node_exporter 1.5's infiniband collector's names, plus the link layer, the hw_counters and the
// configured expectation. procfs reads an HCA as a whole, so one unreadable file costs its HCA
// (counted under source="infiniband", the HCA logged), never the other HCAs.
func (s *taskScraper) scrapeInfiniBand(now pcommon.Timestamp, errs *scrapererror.ScrapeErrors) {
	ib := s.cfg.InfiniBand
	if !ib.Enabled {
		return
	}
	if ib.ExpectedActivePorts > 0 {
		s.mb.RecordNodeInfinibandExpectedActivePortsDataPoint(now, int64(ib.ExpectedActivePorts))
		s.mb.RecordNodeInfinibandExpectedRateBytesPerSecondDataPoint(now, ib.ExpectedRateGbps*gbpsToBytes)
	}
	names, err := s.sys.InfiniBandClassDevices()
	if errors.Is(err, fs.ErrNotExist) {
		return // no RDMA device on this node (or ib_core not loaded): nothing to report
	}
	if err != nil {
		s.nodeReadFailed(errs, metadata.AttributeSourceInfiniband, err)
		return
	}
	slices.Sort(names)
	for _, name := range names {
		func() {
			defer s.recoverRead(metadata.AttributeSourceInfiniband, name, nil)
			dev, err := s.sys.InfiniBandDevice(name)
			if err != nil {
				s.readFailed(metadata.AttributeSourceInfiniband, name, err)
				return
			}
			s.recordHCA(now, dev)
		}()
	}
}

func (s *taskScraper) recordHCA(now pcommon.Timestamp, dev *sysfs.InfiniBandDevice) {
	s.mb.RecordNodeInfinibandInfoDataPoint(now, 1, dev.BoardID, dev.Name, dev.FirmwareVersion, dev.HCAType)
	for _, n := range slices.Sorted(maps.Keys(dev.Ports)) {
		p := dev.Ports[n]
		port := strconv.FormatUint(uint64(p.Port), 10)
		s.mb.RecordNodeInfinibandStateIDDataPoint(now, float64(p.StateID), dev.Name, port)
		s.mb.RecordNodeInfinibandPhysicalStateIDDataPoint(now, float64(p.PhysStateID), dev.Name, port)
		s.mb.RecordNodeInfinibandRateBytesPerSecondDataPoint(now, float64(p.Rate), dev.Name, port)
		s.mb.RecordNodeInfinibandLinkLayerInfoDataPoint(now, 1, dev.Name, port, p.LinkLayer)
		for _, c := range s.ibCounters(&p.Counters) {
			// A counter the driver does not have (or answers "N/A (no PMA)") is absent, not 0.
			if c.value != nil {
				c.record(now, float64(*c.value), dev.Name, port)
			}
		}
		for _, c := range hwCounters(&p.HwCounters) {
			if c.value != nil {
				s.mb.RecordNodeInfinibandHwCountersTotalDataPoint(now, float64(*c.value), dev.Name, port, c.counter)
			}
		}
	}
}

type ibCounter struct {
	value  *uint64
	record func(ts pcommon.Timestamp, val float64, device, port string)
}

// ibCounters pairs the counters/ values with their node_exporter metrics (its 1.5's set, less
// the counters_ext ones of kernels before 4.5).
func (s *taskScraper) ibCounters(c *sysfs.InfiniBandCounters) []ibCounter {
	mb := s.mb
	return []ibCounter{
		{c.ExcessiveBufferOverrunErrors, mb.RecordNodeInfinibandExcessiveBufferOverrunErrorsTotalDataPoint},
		{c.LinkDowned, mb.RecordNodeInfinibandLinkDownedTotalDataPoint},
		{c.LinkErrorRecovery, mb.RecordNodeInfinibandLinkErrorRecoveryTotalDataPoint},
		{c.LocalLinkIntegrityErrors, mb.RecordNodeInfinibandLocalLinkIntegrityErrorsTotalDataPoint},
		{c.MulticastRcvPackets, mb.RecordNodeInfinibandMulticastPacketsReceivedTotalDataPoint},
		{c.MulticastXmitPackets, mb.RecordNodeInfinibandMulticastPacketsTransmittedTotalDataPoint},
		{c.PortRcvConstraintErrors, mb.RecordNodeInfinibandPortConstraintErrorsReceivedTotalDataPoint},
		{c.PortXmitConstraintErrors, mb.RecordNodeInfinibandPortConstraintErrorsTransmittedTotalDataPoint},
		{c.PortRcvData, mb.RecordNodeInfinibandPortDataReceivedBytesTotalDataPoint},
		{c.PortXmitData, mb.RecordNodeInfinibandPortDataTransmittedBytesTotalDataPoint},
		{c.PortRcvDiscards, mb.RecordNodeInfinibandPortDiscardsReceivedTotalDataPoint},
		{c.PortXmitDiscards, mb.RecordNodeInfinibandPortDiscardsTransmittedTotalDataPoint},
		{c.PortRcvErrors, mb.RecordNodeInfinibandPortErrorsReceivedTotalDataPoint},
		{c.PortRcvPackets, mb.RecordNodeInfinibandPortPacketsReceivedTotalDataPoint},
		{c.PortXmitPackets, mb.RecordNodeInfinibandPortPacketsTransmittedTotalDataPoint},
		{c.PortRcvRemotePhysicalErrors, mb.RecordNodeInfinibandPortReceiveRemotePhysicalErrorsTotalDataPoint},
		{c.PortRcvSwitchRelayErrors, mb.RecordNodeInfinibandPortReceiveSwitchRelayErrorsTotalDataPoint},
		{c.PortXmitWait, mb.RecordNodeInfinibandPortTransmitWaitTotalDataPoint},
		{c.SymbolError, mb.RecordNodeInfinibandSymbolErrorTotalDataPoint},
		{c.UnicastRcvPackets, mb.RecordNodeInfinibandUnicastPacketsReceivedTotalDataPoint},
		{c.UnicastXmitPackets, mb.RecordNodeInfinibandUnicastPacketsTransmittedTotalDataPoint},
		{c.VL15Dropped, mb.RecordNodeInfinibandVl15DroppedTotalDataPoint},
	}
}

type hwCounter struct {
	value   *uint64
	counter metadata.AttributeCounter
}

// hwCounters pairs the hw_counters/ values procfs knows with their counter label.
func hwCounters(c *sysfs.InfiniBandHwCounters) []hwCounter {
	return []hwCounter{
		{c.DuplicateRequest, metadata.AttributeCounterDuplicateRequest},
		{c.ImpliedNakSeqErr, metadata.AttributeCounterImpliedNakSeqErr},
		{c.Lifespan, metadata.AttributeCounterLifespan},
		{c.LocalAckTimeoutErr, metadata.AttributeCounterLocalAckTimeoutErr},
		{c.NpCnpSent, metadata.AttributeCounterNpCnpSent},
		{c.NpEcnMarkedRocePackets, metadata.AttributeCounterNpEcnMarkedRocePackets},
		{c.OutOfBuffer, metadata.AttributeCounterOutOfBuffer},
		{c.OutOfSequence, metadata.AttributeCounterOutOfSequence},
		{c.PacketSeqErr, metadata.AttributeCounterPacketSeqErr},
		{c.ReqCqeError, metadata.AttributeCounterReqCqeError},
		{c.ReqCqeFlushError, metadata.AttributeCounterReqCqeFlushError},
		{c.ReqRemoteAccessErrors, metadata.AttributeCounterReqRemoteAccessErrors},
		{c.ReqRemoteInvalidRequest, metadata.AttributeCounterReqRemoteInvalidRequest},
		{c.RespCqeError, metadata.AttributeCounterRespCqeError},
		{c.RespCqeFlushError, metadata.AttributeCounterRespCqeFlushError},
		{c.RespLocalLengthError, metadata.AttributeCounterRespLocalLengthError},
		{c.RespRemoteAccessErrors, metadata.AttributeCounterRespRemoteAccessErrors},
		{c.RnrNakRetryErr, metadata.AttributeCounterRnrNakRetryErr},
		{c.RoceAdpRetrans, metadata.AttributeCounterRoceAdpRetrans},
		{c.RoceAdpRetransTo, metadata.AttributeCounterRoceAdpRetransTo},
		{c.RoceSlowRestart, metadata.AttributeCounterRoceSlowRestart},
		{c.RoceSlowRestartCnps, metadata.AttributeCounterRoceSlowRestartCnps},
		{c.RoceSlowRestartTrans, metadata.AttributeCounterRoceSlowRestartTrans},
		{c.RpCnpHandled, metadata.AttributeCounterRpCnpHandled},
		{c.RpCnpIgnored, metadata.AttributeCounterRpCnpIgnored},
		{c.RxAtomicRequests, metadata.AttributeCounterRxAtomicRequests},
		{c.RxDctConnect, metadata.AttributeCounterRxDctConnect},
		{c.RxIcrcEncapsulated, metadata.AttributeCounterRxIcrcEncapsulated},
		{c.RxReadRequests, metadata.AttributeCounterRxReadRequests},
		{c.RxWriteRequests, metadata.AttributeCounterRxWriteRequests},
	}
}
