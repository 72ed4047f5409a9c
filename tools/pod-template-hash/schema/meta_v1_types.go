package v1

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
)

type ObjectMeta struct {
	Name                       string               `json:"name,omitempty"`
	GenerateName               string               `json:"generateName,omitempty"`
	Namespace                  string               `json:"namespace,omitempty"`
	SelfLink                   string               `json:"selfLink,omitempty"`
	UID                        types.UID            `json:"uid,omitempty"`
	ResourceVersion            string               `json:"resourceVersion,omitempty"`
	Generation                 int64                `json:"generation,omitempty"`
	CreationTimestamp          Time                 `json:"creationTimestamp,omitempty,omitzero"`
	DeletionTimestamp          *Time                `json:"deletionTimestamp,omitempty"`
	DeletionGracePeriodSeconds *int64               `json:"deletionGracePeriodSeconds,omitempty"`
	Labels                     map[string]string    `json:"labels,omitempty"`
	Annotations                map[string]string    `json:"annotations,omitempty"`
	OwnerReferences            []OwnerReference     `json:"ownerReferences,omitempty"`
	Finalizers                 []string             `json:"finalizers,omitempty"`
	ManagedFields              []ManagedFieldsEntry `json:"managedFields,omitempty"`
}

type OwnerReference struct {
	APIVersion         string    `json:"apiVersion"`
	Kind               string    `json:"kind"`
	Name               string    `json:"name"`
	UID                types.UID `json:"uid"`
	Controller         *bool     `json:"controller,omitempty"`
	BlockOwnerDeletion *bool     `json:"blockOwnerDeletion,omitempty"`
}

type LabelSelector struct {
	MatchLabels      map[string]string          `json:"matchLabels,omitempty"`
	MatchExpressions []LabelSelectorRequirement `json:"matchExpressions,omitempty"`
}

type LabelSelectorRequirement struct {
	Key      string                `json:"key"`
	Operator LabelSelectorOperator `json:"operator"`
	Values   []string              `json:"values,omitempty"`
}

type LabelSelectorOperator string

type ManagedFieldsEntry struct {
	Manager     string                     `json:"manager,omitempty"`
	Operation   ManagedFieldsOperationType `json:"operation,omitempty"`
	APIVersion  string                     `json:"apiVersion,omitempty"`
	Time        *Time                      `json:"time,omitempty"`
	FieldsType  string                     `json:"fieldsType,omitempty"`
	FieldsV1    *FieldsV1                  `json:"fieldsV1,omitempty"`
	Subresource string                     `json:"subresource,omitempty"`
}

type ManagedFieldsOperationType string

type FieldsV1 struct {
	Raw []byte `json:"-"`
}

type Time struct {
	time.Time `json:",inline"`
}
