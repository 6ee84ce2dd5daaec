//! The apiserver's column definitions (`TableColumnDefinition`) of each built-in kind,
//! exactly as `printers.go` declares them; the descriptions are the API types' SwaggerDoc
//! texts the apiserver sends.

use std::borrow::Cow;

use crate::{Column, ColumnType};

pub(crate) const METADATA_NAME: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
pub(crate) const METADATA_CREATION_TIMESTAMP: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";
const TEMPLATE_CONTAINERS: &str = "Names of each container in the template.";
const TEMPLATE_IMAGES: &str = "Images referenced by each container in the template.";
const DEPLOYMENT_READY: &str = "Number of the pod with ready state";
const JOB_SELECTOR: &str = "A label query over pods that should match the pod count. Normally, the system sets this field for you. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors";
const NODE_INTERNAL_IP: &str = "List of addresses reachable to the node. Queried from cloud provider, if available. More info: https://kubernetes.io/docs/reference/node/node-status/#addresses Note: This field is declared as mergeable, but the merge key is not sufficiently unique, which can cause data corruption when it is merged. Callers should instead use a full-replacement patch. See https://pr.k8s.io/79391 for an example. Consumers should assume that addresses can change during the lifetime of a Node. However, there are some exceptions where this may not be possible, such as Pods that inherit a Node's address in its own status or consumers of the downward API (status.hostIP).";

const fn column(
    name: &'static str,
    type_: ColumnType,
    format: &'static str,
    description: &'static str,
    priority: i32,
) -> Column {
    Column {
        name: Cow::Borrowed(name),
        type_,
        format: Cow::Borrowed(format),
        description: Cow::Borrowed(description),
        priority,
    }
}

/// The object's name column, first in every kind but Events.
const NAME: Column = column("Name", ColumnType::String, "name", METADATA_NAME, 0);
/// The creation time as an age.
const AGE: Column = column(
    "Age",
    ColumnType::String,
    "",
    METADATA_CREATION_TIMESTAMP,
    0,
);
/// A pod template's container names (`-o wide`).
const CONTAINERS: Column = column("Containers", ColumnType::String, "", TEMPLATE_CONTAINERS, 1);
/// A pod template's images (`-o wide`).
const IMAGES: Column = column("Images", ColumnType::String, "", TEMPLATE_IMAGES, 1);
pub(crate) const POD: &[Column] = &[
    NAME,
    column(
        "Ready",
        ColumnType::String,
        "",
        "The aggregate readiness state of this pod for accepting traffic.",
        0,
    ),
    column(
        "Status",
        ColumnType::String,
        "",
        "The aggregate status of the containers in this pod.",
        0,
    ),
    column(
        "Restarts",
        ColumnType::String,
        "",
        "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
        0,
    ),
    AGE,
    column(
        "IP",
        ColumnType::String,
        "",
        "podIP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.",
        1,
    ),
    column(
        "Node",
        ColumnType::String,
        "",
        "NodeName indicates in which node this pod is scheduled. If empty, this pod is a candidate for scheduling by the scheduler defined in schedulerName. Once this field is set, the kubelet for this node becomes responsible for the lifecycle of this pod. This field should not be used to express a desire for the pod to be scheduled on a specific node. https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/#nodename",
        1,
    ),
    column(
        "Nominated Node",
        ColumnType::String,
        "",
        "nominatedNodeName is set only when this pod preempts other pods on the node, but it cannot be scheduled right away as preemption victims receive their graceful termination periods. This field does not guarantee that the pod will be scheduled on this node. Scheduler may decide to place the pod elsewhere if other nodes become available sooner. Scheduler may also decide to give the resources on this node to a higher priority pod that is created after preemption. As a result, this field may be different than PodSpec.nodeName when the pod is scheduled.",
        1,
    ),
    column(
        "Readiness Gates",
        ColumnType::String,
        "",
        "If specified, all readiness gates will be evaluated for pod readiness. A pod is ready when all its containers are ready AND all conditions specified in the readiness gates have status equal to \"True\" More info: https://git.k8s.io/enhancements/keps/sig-network/580-pod-readiness-gates",
        1,
    ),
];
pub(crate) const DEPLOYMENT: &[Column] = &[
    NAME,
    column("Ready", ColumnType::String, "", DEPLOYMENT_READY, 0),
    column(
        "Up-to-date",
        ColumnType::String,
        "",
        "Total number of non-terminating pods targeted by this deployment that have the desired template spec.",
        0,
    ),
    column(
        "Available",
        ColumnType::String,
        "",
        "Total number of available non-terminating pods (ready for at least minReadySeconds) targeted by this deployment.",
        0,
    ),
    AGE,
    CONTAINERS,
    IMAGES,
    column(
        "Selector",
        ColumnType::String,
        "",
        "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment.",
        1,
    ),
];
pub(crate) const STATEFUL_SET: &[Column] = &[
    NAME,
    column("Ready", ColumnType::String, "", DEPLOYMENT_READY, 0),
    AGE,
    CONTAINERS,
    IMAGES,
];
pub(crate) const DAEMON_SET: &[Column] = &[
    NAME,
    column(
        "Desired",
        ColumnType::Integer,
        "",
        "The total number of nodes that should be running the daemon pod (including nodes correctly running the daemon pod). More info: https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/",
        0,
    ),
    column(
        "Current",
        ColumnType::Integer,
        "",
        "The number of nodes that are running at least 1 daemon pod and are supposed to run the daemon pod. More info: https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/",
        0,
    ),
    column(
        "Ready",
        ColumnType::Integer,
        "",
        "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and ready.",
        0,
    ),
    column(
        "Up-to-date",
        ColumnType::Integer,
        "",
        "The total number of nodes that are running updated daemon pod",
        0,
    ),
    column(
        "Available",
        ColumnType::Integer,
        "",
        "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available (ready for at least spec.minReadySeconds)",
        0,
    ),
    column(
        "Node Selector",
        ColumnType::String,
        "",
        "NodeSelector is a selector which must be true for the pod to fit on a node. Selector which must match a node's labels for the pod to be scheduled on that node. More info: https://kubernetes.io/docs/concepts/configuration/assign-pod-node/",
        0,
    ),
    AGE,
    CONTAINERS,
    IMAGES,
    column(
        "Selector",
        ColumnType::String,
        "",
        "A label query over pods that are managed by the daemon set. Must match in order to be controlled. If empty, defaulted to labels on Pod template. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors",
        1,
    ),
];
pub(crate) const REPLICA_SET: &[Column] = &[
    NAME,
    column(
        "Desired",
        ColumnType::Integer,
        "",
        "Replicas is the number of desired pods. This is a pointer to distinguish between explicit zero and unspecified. Defaults to 1. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicaset",
        0,
    ),
    column(
        "Current",
        ColumnType::Integer,
        "",
        "Replicas is the most recently observed number of non-terminating pods. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicaset",
        0,
    ),
    column(
        "Ready",
        ColumnType::Integer,
        "",
        "The number of non-terminating pods targeted by this ReplicaSet with a Ready Condition.",
        0,
    ),
    AGE,
    CONTAINERS,
    IMAGES,
    column(
        "Selector",
        ColumnType::String,
        "",
        "Selector is a label query over pods that should match the replica count. If the selector is empty, it is defaulted to the labels present on the pod template. Label keys and values that must match in order to be controlled by this replica set. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors",
        1,
    ),
];
pub(crate) const JOB: &[Column] = &[
    NAME,
    column("Status", ColumnType::String, "", "Status of the job.", 0),
    column(
        "Completions",
        ColumnType::String,
        "",
        "The number of pods which reached phase Succeeded. The value increases monotonically for a given spec. However, it may decrease in reaction to scale down of elastic indexed jobs.",
        0,
    ),
    column(
        "Duration",
        ColumnType::String,
        "",
        "Time required to complete the job.",
        0,
    ),
    AGE,
    CONTAINERS,
    IMAGES,
    column("Selector", ColumnType::String, "", JOB_SELECTOR, 1),
];
pub(crate) const CRON_JOB: &[Column] = &[
    NAME,
    column(
        "Schedule",
        ColumnType::String,
        "",
        "The schedule in Cron format, see https://en.wikipedia.org/wiki/Cron.",
        0,
    ),
    column(
        "Timezone",
        ColumnType::String,
        "",
        "The time zone name for the given schedule, see https://en.wikipedia.org/wiki/List_of_tz_database_time_zones. If not specified, this will default to the time zone of the kube-controller-manager process. The set of valid time zone names and the time zone offset is loaded from the system-wide time zone database by the API server during CronJob validation and the controller manager during execution. If no system-wide time zone database can be found a bundled version of the database is used instead. If the time zone name becomes invalid during the lifetime of a CronJob or due to a change in host configuration, the controller will stop creating new new Jobs and will create a system event with the reason UnknownTimeZone. More information can be found in https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/#time-zones",
        0,
    ),
    column(
        "Suspend",
        ColumnType::Boolean,
        "",
        "This flag tells the controller to suspend subsequent executions, it does not apply to already started executions.  Defaults to false.",
        0,
    ),
    column(
        "Active",
        ColumnType::Integer,
        "",
        "A list of pointers to currently running jobs.",
        0,
    ),
    column(
        "Last Schedule",
        ColumnType::String,
        "",
        "Information when was the last time the job was successfully scheduled.",
        0,
    ),
    AGE,
    CONTAINERS,
    IMAGES,
    column("Selector", ColumnType::String, "", JOB_SELECTOR, 1),
];
pub(crate) const HORIZONTAL_POD_AUTOSCALER: &[Column] = &[
    NAME,
    column(
        "Reference",
        ColumnType::String,
        "",
        "scaleTargetRef points to the target resource to scale, and is used to the pods for which metrics should be collected, as well as to actually change the replica count.",
        0,
    ),
    column(
        "Targets",
        ColumnType::String,
        "",
        "metrics contains the specifications for which to use to calculate the desired replica count (the maximum replica count across all metrics will be used).  The desired replica count is calculated multiplying the ratio between the target value and the current value by the current number of pods.  Ergo, metrics used must decrease as the pod count is increased, and vice-versa.  See the individual metric source types for more information about how each type of metric must respond.",
        0,
    ),
    column(
        "MinPods",
        ColumnType::String,
        "",
        "minReplicas is the lower limit for the number of replicas to which the autoscaler can scale down.  It defaults to 1 pod.  minReplicas is allowed to be 0 if the alpha feature gate HPAScaleToZero is enabled and at least one Object or External metric is configured.  Scaling is active as long as at least one metric value is available.",
        0,
    ),
    column(
        "MaxPods",
        ColumnType::String,
        "",
        "maxReplicas is the upper limit for the number of replicas to which the autoscaler can scale up. It cannot be less that minReplicas.",
        0,
    ),
    column(
        "Replicas",
        ColumnType::String,
        "",
        "currentReplicas is current number of replicas of pods managed by this autoscaler, as last seen by the autoscaler.",
        0,
    ),
    AGE,
];
pub(crate) const POD_DISRUPTION_BUDGET: &[Column] = &[
    NAME,
    column(
        "Min Available",
        ColumnType::String,
        "",
        "The minimum number of pods that must be available.",
        0,
    ),
    column(
        "Max Unavailable",
        ColumnType::String,
        "",
        "The maximum number of pods that may be unavailable.",
        0,
    ),
    column(
        "Allowed Disruptions",
        ColumnType::Integer,
        "",
        "Calculated number of pods that may be disrupted at this time.",
        0,
    ),
    AGE,
];
pub(crate) const SERVICE: &[Column] = &[
    NAME,
    column(
        "Type",
        ColumnType::String,
        "",
        "type determines how the Service is exposed. Defaults to ClusterIP. Valid options are ExternalName, ClusterIP, NodePort, and LoadBalancer. \"ClusterIP\" allocates a cluster-internal IP address for load-balancing to endpoints. Endpoints are determined by the selector or if that is not specified, by manual construction of an Endpoints object or EndpointSlice objects. If clusterIP is \"None\", no virtual IP is allocated and the endpoints are published as a set of endpoints rather than a virtual IP. \"NodePort\" builds on ClusterIP and allocates a port on every node which routes to the same endpoints as the clusterIP. \"LoadBalancer\" builds on NodePort and creates an external load-balancer (if supported in the current cloud) which routes to the same endpoints as the clusterIP. \"ExternalName\" aliases this service to the specified externalName. Several other fields do not apply to ExternalName services. More info: https://kubernetes.io/docs/concepts/services-networking/service/#publishing-services-service-types",
        0,
    ),
    column(
        "Cluster-IP",
        ColumnType::String,
        "",
        "clusterIP is the IP address of the service and is usually assigned randomly. If an address is specified manually, is in-range (as per system configuration), and is not in use, it will be allocated to the service; otherwise creation of the service will fail. This field may not be changed through updates unless the type field is also being changed to ExternalName (which requires this field to be blank) or the type field is being changed from ExternalName (in which case this field may optionally be specified, as describe above).  Valid values are \"None\", empty string (\"\"), or a valid IP address. Setting this to \"None\" makes a \"headless service\" (no virtual IP), which is useful when direct endpoint connections are preferred and proxying is not required.  Only applies to types ClusterIP, NodePort, and LoadBalancer. If this field is specified when creating a Service of type ExternalName, creation will fail. This field will be wiped when updating a Service to type ExternalName. More info: https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies",
        0,
    ),
    column(
        "External-IP",
        ColumnType::String,
        "",
        "externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service.  These IPs are not managed by Kubernetes.  The user is responsible for ensuring that traffic arrives at a node with this IP.  A common example is external load-balancers that are not part of the Kubernetes system.",
        0,
    ),
    column(
        "Port(s)",
        ColumnType::String,
        "",
        "The list of ports that are exposed by this service. More info: https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies",
        0,
    ),
    AGE,
    column(
        "Selector",
        ColumnType::String,
        "",
        "Route service traffic to pods with label keys and values matching this selector. If empty or not present, the service is assumed to have an external process managing its endpoints, which Kubernetes will not modify. Only applies to types ClusterIP, NodePort, and LoadBalancer. Ignored if type is ExternalName. More info: https://kubernetes.io/docs/concepts/services-networking/service/",
        1,
    ),
];
pub(crate) const ENDPOINTS: &[Column] = &[
    NAME,
    column(
        "Endpoints",
        ColumnType::String,
        "",
        "The set of all endpoints is the union of all subsets. Addresses are placed into subsets according to the IPs they share. A single address with multiple ports, some of which are ready and some of which are not (because they come from different containers) will result in the address being displayed in different subsets for the different ports. No address will appear in both Addresses and NotReadyAddresses in the same subset. Sets of addresses and ports that comprise a service.",
        0,
    ),
    AGE,
];
pub(crate) const ENDPOINT_SLICE: &[Column] = &[
    NAME,
    column(
        "AddressType",
        ColumnType::String,
        "",
        "addressType specifies the type of address carried by this EndpointSlice. All addresses in this slice must be the same type. This field is immutable after creation. The following address types are currently supported: * IPv4: Represents an IPv4 Address. * IPv6: Represents an IPv6 Address. * FQDN: Represents a Fully Qualified Domain Name.",
        0,
    ),
    column(
        "Ports",
        ColumnType::String,
        "",
        "ports specifies the list of network ports exposed by each endpoint in this slice. Each port must have a unique name. When ports is empty, it indicates that there are no defined ports. When a port is defined with a nil port value, it indicates \"all ports\". Each slice may include a maximum of 100 ports.",
        0,
    ),
    column(
        "Endpoints",
        ColumnType::String,
        "",
        "endpoints is a list of unique endpoints in this slice. Each slice may include a maximum of 1000 endpoints.",
        0,
    ),
    AGE,
];
pub(crate) const INGRESS: &[Column] = &[
    NAME,
    column(
        "Class",
        ColumnType::String,
        "",
        "The name of the IngressClass resource that should be used for additional configuration",
        0,
    ),
    column(
        "Hosts",
        ColumnType::String,
        "",
        "Hosts that incoming requests are matched against before the ingress rule",
        0,
    ),
    column(
        "Address",
        ColumnType::String,
        "",
        "Address is a list containing ingress points for the load-balancer",
        0,
    ),
    column(
        "Ports",
        ColumnType::String,
        "",
        "Ports of TLS configurations that open",
        0,
    ),
    AGE,
];
pub(crate) const INGRESS_CLASS: &[Column] = &[
    NAME,
    column(
        "Controller",
        ColumnType::String,
        "",
        "Controller that is responsible for handling this class",
        0,
    ),
    column(
        "Parameters",
        ColumnType::String,
        "",
        "A reference to a resource with additional parameters",
        0,
    ),
    AGE,
];
pub(crate) const NETWORK_POLICY: &[Column] = &[
    NAME,
    column(
        "Pod-Selector",
        ColumnType::String,
        "",
        "Selects the pods to which this NetworkPolicy object applies.  The array of ingress rules is applied to any pods selected by this field. Multiple network policies can select the same set of pods.  In this case, the ingress rules for each are combined additively. This field is NOT optional and follows standard label selector semantics. An empty podSelector matches all pods in this namespace.",
        0,
    ),
    AGE,
];
pub(crate) const CONFIG_MAP: &[Column] = &[
    NAME,
    column(
        "Data",
        ColumnType::String,
        "",
        "Data contains the configuration data. Each key must consist of alphanumeric characters, '-', '_' or '.'. Values with non-UTF-8 byte sequences must use the BinaryData field. The keys stored in Data must not overlap with the keys in the BinaryData field, this is enforced during validation process.",
        0,
    ),
    AGE,
];
pub(crate) const SECRET: &[Column] = &[
    NAME,
    column(
        "Type",
        ColumnType::String,
        "",
        "Used to facilitate programmatic handling of secret data. More info: https://kubernetes.io/docs/concepts/configuration/secret/#secret-types",
        0,
    ),
    column(
        "Data",
        ColumnType::String,
        "",
        "Data contains the secret data. Each key must consist of alphanumeric characters, '-', '_' or '.'. The serialized form of the secret data is a base64 encoded string, representing the arbitrary (possibly non-string) data value here. Described in https://tools.ietf.org/html/rfc4648#section-4",
        0,
    ),
    AGE,
];
pub(crate) const PERSISTENT_VOLUME_CLAIM: &[Column] = &[
    NAME,
    column(
        "Status",
        ColumnType::String,
        "",
        "phase represents the current phase of PersistentVolumeClaim.",
        0,
    ),
    column(
        "Volume",
        ColumnType::String,
        "",
        "volumeName is the binding reference to the PersistentVolume backing this claim.",
        0,
    ),
    column(
        "Capacity",
        ColumnType::String,
        "",
        "capacity represents the actual resources of the underlying volume.",
        0,
    ),
    column(
        "Access Modes",
        ColumnType::String,
        "",
        "accessModes contains the actual access modes the volume backing the PVC has. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#access-modes-1",
        0,
    ),
    column(
        "StorageClass",
        ColumnType::String,
        "",
        "StorageClass of the pvc",
        0,
    ),
    column(
        "VolumeAttributesClass",
        ColumnType::String,
        "",
        "VolumeAttributesClass of the pvc",
        0,
    ),
    AGE,
    column(
        "VolumeMode",
        ColumnType::String,
        "",
        "volumeMode defines what type of volume is required by the claim. Value of Filesystem is implied when not included in claim spec.",
        1,
    ),
];
pub(crate) const PERSISTENT_VOLUME: &[Column] = &[
    NAME,
    column(
        "Capacity",
        ColumnType::String,
        "",
        "capacity is the description of the persistent volume's resources and capacity. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#capacity",
        0,
    ),
    column(
        "Access Modes",
        ColumnType::String,
        "",
        "accessModes contains all ways the volume can be mounted. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#access-modes",
        0,
    ),
    column(
        "Reclaim Policy",
        ColumnType::String,
        "",
        "persistentVolumeReclaimPolicy defines what happens to a persistent volume when released from its claim. Valid options are Retain (default for manually created PersistentVolumes), Delete (default for dynamically provisioned PersistentVolumes), and Recycle (deprecated). Recycle must be supported by the volume plugin underlying this PersistentVolume. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#reclaiming",
        0,
    ),
    column(
        "Status",
        ColumnType::String,
        "",
        "phase indicates if a volume is available, bound to a claim, or released by a claim. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#phase",
        0,
    ),
    column(
        "Claim",
        ColumnType::String,
        "",
        "claimRef is part of a bi-directional binding between PersistentVolume and PersistentVolumeClaim. Expected to be non-nil when bound. claim.VolumeName is the authoritative bind between PV and PVC. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#binding",
        0,
    ),
    column(
        "StorageClass",
        ColumnType::String,
        "",
        "StorageClass of the pv",
        0,
    ),
    column(
        "VolumeAttributesClass",
        ColumnType::String,
        "",
        "VolumeAttributesClass of the pv",
        0,
    ),
    column(
        "Reason",
        ColumnType::String,
        "",
        "reason is a brief CamelCase string that describes any failure and is meant for machine parsing and tidy display in the CLI.",
        0,
    ),
    AGE,
    column(
        "VolumeMode",
        ColumnType::String,
        "",
        "volumeMode defines if a volume is intended to be used with a formatted filesystem or to remain in raw block state. Value of Filesystem is implied when not included in spec.",
        1,
    ),
];
pub(crate) const STORAGE_CLASS: &[Column] = &[
    NAME,
    column(
        "Provisioner",
        ColumnType::String,
        "",
        "provisioner indicates the type of the provisioner.",
        0,
    ),
    column(
        "ReclaimPolicy",
        ColumnType::String,
        "",
        "reclaimPolicy controls the reclaimPolicy for dynamically provisioned PersistentVolumes of this storage class. Defaults to Delete.",
        0,
    ),
    column(
        "VolumeBindingMode",
        ColumnType::String,
        "",
        "volumeBindingMode indicates how PersistentVolumeClaims should be provisioned and bound.  When unset, VolumeBindingImmediate is used. This field is only honored by servers that enable the VolumeScheduling feature.",
        0,
    ),
    column(
        "AllowVolumeExpansion",
        ColumnType::String,
        "",
        "allowVolumeExpansion shows whether the storage class allow volume expand.",
        0,
    ),
    AGE,
];
pub(crate) const SERVICE_ACCOUNT: &[Column] = &[NAME, AGE];
pub(crate) const ROLE_BINDING: &[Column] = &[
    NAME,
    column(
        "Role",
        ColumnType::String,
        "",
        "RoleRef can reference a Role in the current namespace or a ClusterRole in the global namespace. If the RoleRef cannot be resolved, the Authorizer must return an error.",
        0,
    ),
    AGE,
    column(
        "Users",
        ColumnType::String,
        "",
        "Users in the roleBinding",
        1,
    ),
    column(
        "Groups",
        ColumnType::String,
        "",
        "Groups in the roleBinding",
        1,
    ),
    column(
        "ServiceAccounts",
        ColumnType::String,
        "",
        "ServiceAccounts in the roleBinding",
        1,
    ),
];
pub(crate) const CLUSTER_ROLE_BINDING: &[Column] = &[
    NAME,
    column(
        "Role",
        ColumnType::String,
        "",
        "RoleRef can only reference a ClusterRole in the global namespace. If the RoleRef cannot be resolved, the Authorizer must return an error.",
        0,
    ),
    AGE,
    column(
        "Users",
        ColumnType::String,
        "",
        "Users in the clusterRoleBinding",
        1,
    ),
    column(
        "Groups",
        ColumnType::String,
        "",
        "Groups in the clusterRoleBinding",
        1,
    ),
    column(
        "ServiceAccounts",
        ColumnType::String,
        "",
        "ServiceAccounts in the clusterRoleBinding",
        1,
    ),
];
pub(crate) const NODE: &[Column] = &[
    NAME,
    column(
        "Status",
        ColumnType::String,
        "",
        "The status of the node",
        0,
    ),
    column("Roles", ColumnType::String, "", "The roles of the node", 0),
    AGE,
    column(
        "Version",
        ColumnType::String,
        "",
        "Kubelet Version reported by the node.",
        0,
    ),
    column("Internal-IP", ColumnType::String, "", NODE_INTERNAL_IP, 1),
    column("External-IP", ColumnType::String, "", NODE_INTERNAL_IP, 1),
    column(
        "OS-Image",
        ColumnType::String,
        "",
        "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).",
        1,
    ),
    column(
        "Kernel-Version",
        ColumnType::String,
        "",
        "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).",
        1,
    ),
    column(
        "Container-Runtime",
        ColumnType::String,
        "",
        "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).",
        1,
    ),
];
pub(crate) const NAMESPACE: &[Column] = &[
    NAME,
    column(
        "Status",
        ColumnType::String,
        "",
        "The status of the namespace",
        0,
    ),
    AGE,
];
pub(crate) const EVENT: &[Column] = &[
    column(
        "Last Seen",
        ColumnType::String,
        "",
        "The time at which the most recent occurrence of this event was recorded.",
        0,
    ),
    column(
        "Type",
        ColumnType::String,
        "",
        "Type of this event (Normal, Warning), new types could be added in the future",
        0,
    ),
    column(
        "Reason",
        ColumnType::String,
        "",
        "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.",
        0,
    ),
    column(
        "Object",
        ColumnType::String,
        "",
        "The object that this event is about.",
        0,
    ),
    column(
        "Subobject",
        ColumnType::String,
        "",
        "If referring to a piece of an object instead of an entire object, this string should contain a valid JSON/Go field access statement, such as desiredState.manifest.containers[2]. For example, if the object reference is to a container within a pod, this would take on a value like: \"spec.containers{name}\" (where \"name\" refers to the name of the container that triggered the event) or if no container name is specified \"spec.containers[2]\" (container with index 2 in this pod). This syntax is chosen only to have some well-defined way of referencing a part of an object.",
        1,
    ),
    column(
        "Source",
        ColumnType::String,
        "",
        "The component reporting this event. Should be a short machine understandable string.",
        1,
    ),
    column(
        "Message",
        ColumnType::String,
        "",
        "A human-readable description of the status of this operation.",
        0,
    ),
    column(
        "First Seen",
        ColumnType::String,
        "",
        "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)",
        1,
    ),
    column(
        "Count",
        ColumnType::String,
        "",
        "The number of times this event has occurred.",
        1,
    ),
    column("Name", ColumnType::String, "name", METADATA_NAME, 1),
];
pub(crate) const RESOURCE_QUOTA: &[Column] = &[
    NAME,
    column(
        "Request",
        ColumnType::String,
        "",
        "Request represents a minimum amount of cpu/memory that a container may consume.",
        0,
    ),
    column(
        "Limit",
        ColumnType::String,
        "",
        "Limits control the maximum amount of cpu/memory that a container may use independent of contention on the node.",
        0,
    ),
    AGE,
];
pub(crate) const PRIORITY_CLASS: &[Column] = &[
    NAME,
    column(
        "Value",
        ColumnType::Integer,
        "",
        "value represents the integer value of this priority class. This is the actual priority that pods receive when they have the name of this class in their pod spec.",
        0,
    ),
    column(
        "Global-Default",
        ColumnType::Boolean,
        "",
        "globalDefault specifies whether this PriorityClass should be considered as the default priority for pods that do not have any priority class. Only one PriorityClass can be marked as `globalDefault`. However, if more than one PriorityClasses exists with their `globalDefault` field set to true, the smallest value of such global default PriorityClasses will be used as the default priority.",
        0,
    ),
    AGE,
    column(
        "PreemptionPolicy",
        ColumnType::String,
        "",
        "preemptionPolicy is the Policy for preempting pods with lower priority. One of Never, PreemptLowerPriority. Defaults to PreemptLowerPriority if unset.",
        0,
    ),
];
pub(crate) const LEASE: &[Column] = &[
    NAME,
    column(
        "Holder",
        ColumnType::String,
        "",
        "holderIdentity contains the identity of the holder of a current lease. If Coordinated Leader Election is used, the holder identity must be equal to the elected LeaseCandidate.metadata.name field.",
        0,
    ),
    AGE,
];
pub(crate) const DEFAULT: &[Column] = &[
    NAME,
    column(
        "Created At",
        ColumnType::Date,
        "",
        METADATA_CREATION_TIMESTAMP,
        0,
    ),
];
