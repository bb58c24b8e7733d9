// Command mindcluster-fixtures writes tests/fixtures/mindcluster/generated/*.json: ConfigMap data as
// MindCluster's device plugin, NodeD and ClusterD write it, byte for byte, so the operator's tests read what
// a cluster holds rather than what Python's json module would write.
//
// Why Go: the CheckCode is SHA-256 of Go's encoding/json output (ascend-device-plugin pkg/common/common.go
// 135-157 MakeDataHash/MarshalData; NodeD the same), and the ConfigMap's bytes are json.Marshal's: struct
// fields in declaration order, map keys sorted, HTML characters escaped. The types below restate the
// wire layouts of Ascend/mind-cluster 22bb3d98 (field names, order and tags; cited at each), written
// here, not copied. Standard library only.
//
// Run: cd hack/mindcluster-fixtures && go run . ../../tests/fixtures/mindcluster/generated
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// updateTime is the DeviceInfo.UpdateTime every fixture carries (the tests judge at this instant).
const updateTime = 1800000000

// faultTimeMs is when every fixture's faults began: 5 s before updateTime, in milliseconds.
const faultTimeMs = (updateTime - 5) * 1000

// faultTimeAndLevel is pkg/common/proto.go:221-225.
type faultTimeAndLevel struct {
	FaultTime  int64  `json:"fault_time"`
	FaultLevel string `json:"fault_level"`
}

// deviceFault is pkg/common/proto.go:227-236, one entry of `<resource>-Fault`.
type deviceFault struct {
	FaultType            string                       `json:"fault_type"`
	NPUName              string                       `json:"npu_name"`
	LargeModelFaultLevel string                       `json:"large_model_fault_level"`
	FaultLevel           string                       `json:"fault_level"`
	FaultHandling        string                       `json:"fault_handling"`
	FaultCode            string                       `json:"fault_code"`
	FaultTimeAndLevelMap map[string]faultTimeAndLevel `json:"fault_time_and_level_map"`
}

// nodeDeviceInfo is pkg/common/proto.go:80-83.
type nodeDeviceInfo struct {
	DeviceList map[string]string
	UpdateTime int64
}

// nodeDeviceInfoCache is pkg/common/proto.go:36-42, the DeviceInfoCfg value.
type nodeDeviceInfoCache struct {
	DeviceInfo  nodeDeviceInfo
	SuperPodID  int32
	ServerIndex int32
	CheckCode   string
	RackID      *int32 `json:"RackID,omitempty"`
}

// faultDev is noded/pkg/common/type.go (FaultDev), one entry of NodeInfo.FaultDevList.
type faultDev struct {
	DeviceType string
	DeviceId   int64
	FaultCode  []string
	FaultLevel string
}

// nodeInfo and nodeInfoCM are noded/pkg/common/type.go:50-79, the NodeInfo value.
type nodeInfo struct {
	FaultDevList []*faultDev
	NodeStatus   string
}

type nodeInfoCM struct {
	NodeInfo  nodeInfo
	CheckCode string
}

// clusterDeviceInfo is clusterd/pkg/common/constant/type.go:61-67 with DeviceInfoNoName (108-112) embedded.
type clusterDeviceInfo struct {
	nodeDeviceInfo
	CmName      string
	SuperPodID  int32
	RackID      int32
	ServerIndex int32
}

// clusterNodeInfo is clusterd type.go:46-50 with NodeInfoNoName (40-43) embedded.
type clusterNodeInfo struct {
	nodeInfo
	CmName     string
	UpdateTime int64
}

// clusterSwitchInfo is clusterd type.go:69-82 (SwitchInfo: SwitchFaultInfo embedded, then CmName).
type clusterSwitchInfo struct {
	FaultInfo            []map[string]any
	FaultLevel           string
	UpdateTime           int64
	NodeStatus           string
	FaultTimeAndLevelMap map[string]faultTimeAndLevel
	CmName               string
}

func marshal(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func hash(v any) string {
	sum := sha256.Sum256([]byte(marshal(v)))
	return hex.EncodeToString(sum[:])
}

// chipFault is one chip's entry as device/ascendcommon.go:790-812 builds it: the three level fields alike,
// the codes upper-case hex comma-joined, each code's time and level.
func chipFault(name, level string, network bool, codes ...string) deviceFault {
	times := map[string]faultTimeAndLevel{}
	for _, c := range codes {
		times[c] = faultTimeAndLevel{FaultTime: faultTimeMs, FaultLevel: level}
	}
	kind := "CardUnhealthy"
	if network {
		kind = "CardNetworkUnhealthy"
	}
	return deviceFault{kind, name, level, level, level, strings.Join(codes, ","), times}
}

// deviceList is what device/ascend910.go:664-676 writes under `resource` (huawei.com/Ascend910 unless
// renamed): the free healthy chips, the unhealthy ones, and the fault entries.
func deviceList(resource string, free, unhealthy []string, faults []deviceFault) map[string]string {
	return map[string]string{
		resource:                       strings.Join(free, ","),
		resource + "-Fault":            marshal(faults),
		resource + "-NetworkUnhealthy": "",
		resource + "-Recovering":       "",
		resource + "-Unhealthy":        strings.Join(unhealthy, ","),
	}
}

// deviceInfoCM is the plugin's ConfigMap data (kubeclient/client_server.go:191-225): DeviceInfoCfg with its
// CheckCode over DeviceInfo, and the ManuallySeparateNPU key.
func deviceInfoCM(list map[string]string) map[string]string {
	cache := nodeDeviceInfoCache{DeviceInfo: nodeDeviceInfo{list, updateTime}, SuperPodID: -2, ServerIndex: -2}
	cache.CheckCode = hash(cache.DeviceInfo)
	return map[string]string{"DeviceInfoCfg": marshal(cache), "ManuallySeparateNPU": ""}
}

func chips(prefix string, from, to int) []string {
	var names []string
	for i := from; i < to; i++ {
		names = append(names, fmt.Sprintf("%s-%d", prefix, i))
	}
	return names
}

func faults(level string, names []string, codes ...string) []deviceFault {
	out := []deviceFault{}
	for _, n := range names {
		out = append(out, chipFault(n, level, false, codes...))
	}
	return out
}

type fixture struct {
	Source string            `json:"source"`
	Data   map[string]string `json:"data"`
}

func main() {
	dir := os.Args[1]
	const r = "huawei.com/Ascend910"
	pre := []deviceFault{chipFault("Ascend910-2", "PreSeparateNPU", false, "81078603")}
	out := map[string]fixture{
		"preseparate-volcano": {
			"plugin: Ascend910-2 PreSeparateNPU, a pod whose huawei.com/Ascend910 annotation (Volcano's) names it: " +
				"Healthy (ascendcommon.go:1144-1147), so off the Unhealthy list; all 8 chips allocated",
			deviceInfoCM(deviceList(r, nil, nil, pre))},
		"preseparate-no-volcano": {
			"plugin: Ascend910-2 PreSeparateNPU, no pod annotation naming it (no Volcano): Unhealthy at once " +
				"(ascendcommon.go:1148)",
			deviceInfoCM(deviceList(r, nil, []string{"Ascend910-2"}, pre))},
		"hot-reset-normalnpu": {
			"plugin: Ascend910-5 Unhealthy with no fault code left (a hot reset): its entry at NormalNPU, no codes " +
				"(ascendcommon.go:783-812, fault_code.go:1171-1174)",
			deviceInfoCM(deviceList(r, nil, []string{"Ascend910-5"},
				[]deviceFault{chipFault("Ascend910-5", "NormalNPU", false)}))},
		"a3-nine-preseparate": {
			"plugin on a 16-chip A3 node: 9 chips PreSeparateNPU, no Volcano (all Unhealthy), the other 7 free",
			deviceInfoCM(deviceList(r, chips("Ascend910", 9, 16), chips("Ascend910", 0, 9),
				faults("PreSeparateNPU", chips("Ascend910", 0, 9), "81078603")))},
		"a3-five-separate": {
			"plugin on a 16-chip A3 node: 5 chips SeparateNPU (more than half of 8, not of 16)",
			deviceInfoCM(deviceList(r, nil, chips("Ascend910", 0, 5),
				faults("SeparateNPU", chips("Ascend910", 0, 5), "80E18402")))},
		"a3-nine-separate": {
			"plugin on a 16-chip A3 node: 9 chips SeparateNPU (more than half of 16)",
			deviceInfoCM(deviceList(r, nil, chips("Ascend910", 0, 9),
				faults("SeparateNPU", chips("Ascend910", 0, 9), "80E18402")))},
		"custom-name": {
			"plugin renamed by /usr/local/deviceNameCustomization.json (DevicePublicNamePre MyNPU): keys and chips " +
				"renamed (next/devicefactory/customname/public_name_config.go:204-230); MyNPU-3 SeparateNPU",
			deviceInfoCM(deviceList("huawei.com/MyNPU", nil, []string{"MyNPU-3"},
				[]deviceFault{chipFault("MyNPU-3", "SeparateNPU", false, "80E18402")}))},
	}
	info := nodeInfo{FaultDevList: []*faultDev{{"CPU", 1, []string{"00000011"}, "PreSeparateFault"}},
		NodeStatus: "PreSeparate"}
	out["noded-preseparate"] = fixture{
		"NodeD: a PreSeparateFault makes the node PreSeparate (noded control/faultcontrol/fault.go:172-187)",
		map[string]string{"NodeInfo": marshal(nodeInfoCM{info, hash(info)})}}

	// ClusterD's view (clusterd application/resource/report.go): atlas-0's chip 4 SeparateNPU and atlas-1's
	// chip 1 ManuallySeparateNPU (an isolation only ClusterD knows), NodeD's atlas-1 PreSeparate, atlas-2's
	// switch UnHealthy.
	devices := map[string]clusterDeviceInfo{}
	for node, f := range map[string]deviceFault{
		"atlas-0": chipFault("Ascend910-4", "SeparateNPU", false, "80E18402"),
		"atlas-1": chipFault("Ascend910-1", "ManuallySeparateNPU", false, "80E18402"),
	} {
		name := "mindx-dl-deviceinfo-" + node
		list := deviceList(r, nil, []string{f.NPUName}, []deviceFault{f})
		devices[name] = clusterDeviceInfo{nodeDeviceInfo{list, updateTime}, name, -2, 0, -2}
	}
	nodes := map[string]clusterNodeInfo{
		"mindx-dl-nodeinfo-atlas-1": {info, "mindx-dl-nodeinfo-atlas-1", updateTime},
	}
	switches := map[string]clusterSwitchInfo{
		"mindx-dl-switchinfo-atlas-2": {[]map[string]any{}, "SeparateNPU", updateTime, "UnHealthy",
			map[string]faultTimeAndLevel{}, "mindx-dl-switchinfo-atlas-2"},
	}
	out["clusterd-view"] = fixture{
		"ClusterD: one ConfigMap per key here, each ConfigMap's data key its name (report.go:132-220)",
		map[string]string{
			"cluster-info-device-0": marshal(devices),
			"cluster-info-node-cm":  marshal(nodes),
			"cluster-info-switch-0": marshal(switches),
		}}

	names := make([]string, 0, len(out))
	for n := range out {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		b, err := json.MarshalIndent(out[n], "", " ")
		if err != nil {
			panic(err)
		}
		if err := os.WriteFile(filepath.Join(dir, n+".json"), append(b, '\n'), 0o644); err != nil {
			panic(err)
		}
	}
}
