package kubeletadapter

import (
	"k8s.io/klog/v2"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"
	upstream "k8s.io/kubernetes/pkg/kubelet/images/pullmanager"

	"github.com/pullrecords/pullrecords/accessor"
)

// KubeletAccessor presents any accessor.PullRecordsAccessor (an fsstore.Store,
// a memstore.Cache, a memstore.Store...) as the kubelet's
// pullmanager.PullRecordsAccessor, converting records on the way in and out.
// Errors and the (record, exists, err) triples pass through unchanged.
type KubeletAccessor struct {
	records accessor.PullRecordsAccessor
}

var _ upstream.PullRecordsAccessor = (*KubeletAccessor)(nil)

// ToKubelet wraps records as the kubelet's PullRecordsAccessor.
func ToKubelet(records accessor.PullRecordsAccessor) *KubeletAccessor {
	return &KubeletAccessor{records: records}
}

// Unwrap returns the wrapped accessor.
func (k *KubeletAccessor) Unwrap() accessor.PullRecordsAccessor { return k.records }

// ListImagePullIntents lists the intents; with partial success it returns
// what was read and the error, as the wrapped accessor does.
func (k *KubeletAccessor) ListImagePullIntents() ([]*kubeletconfig.ImagePullIntent, error) {
	in, err := k.records.ListImagePullIntents()
	if in == nil {
		return nil, err
	}
	out := make([]*kubeletconfig.ImagePullIntent, len(in))
	for i, intent := range in {
		out[i] = &kubeletconfig.ImagePullIntent{Image: intent.Image}
	}
	return out, err
}

func (k *KubeletAccessor) ImagePullIntentExists(image string) (bool, error) {
	return k.records.ImagePullIntentExists(image)
}

func (k *KubeletAccessor) WriteImagePullIntent(logger klog.Logger, image string) error {
	return k.records.WriteImagePullIntent(logger, image)
}

func (k *KubeletAccessor) DeleteImagePullIntent(logger klog.Logger, image string) error {
	return k.records.DeleteImagePullIntent(logger, image)
}

// ListImagePulledRecords lists the pulled records; with partial success it
// returns what was read and the error, as the wrapped accessor does.
func (k *KubeletAccessor) ListImagePulledRecords() ([]*kubeletconfig.ImagePulledRecord, error) {
	in, err := k.records.ListImagePulledRecords()
	if in == nil {
		return nil, err
	}
	out := make([]*kubeletconfig.ImagePulledRecord, len(in))
	for i, r := range in {
		out[i] = RecordToKubelet(r)
	}
	return out, err
}

func (k *KubeletAccessor) GetImagePulledRecord(imageRef string) (*kubeletconfig.ImagePulledRecord, bool, error) {
	r, exists, err := k.records.GetImagePulledRecord(imageRef)
	return RecordToKubelet(r), exists, err
}

func (k *KubeletAccessor) WriteImagePulledRecord(logger klog.Logger, record *kubeletconfig.ImagePulledRecord) error {
	return k.records.WriteImagePulledRecord(logger, RecordFromKubelet(record))
}

func (k *KubeletAccessor) DeleteImagePulledRecord(logger klog.Logger, imageRef string) error {
	return k.records.DeleteImagePulledRecord(logger, imageRef)
}

// LibraryAccessor presents the kubelet's pullmanager.PullRecordsAccessor (its
// fs accessor, its cache) as an accessor.PullRecordsAccessor, so this
// library's manager, cache or tools can run over the kubelet's own store.
// Records read through it carry LastUpdatedTime in storage form
// (accessor.StorageTime: UTC, whole seconds), as the library's stores
// return it; the kubelet's decoder gives local time, and its cache may hold
// sub-second times the disk never had.
//
// The wrapper adds no checks: the kubelet's fs accessor accepts keys the
// library refuses ("" and invalid UTF-8, accessor.ErrInvalidKey), has its
// own error for a nil record, and is not safe for concurrent writers of one
// key, and it stays so behind this wrapper.
type LibraryAccessor struct {
	records upstream.PullRecordsAccessor
}

var _ accessor.PullRecordsAccessor = (*LibraryAccessor)(nil)

// FromKubelet wraps the kubelet's accessor as this library's.
func FromKubelet(records upstream.PullRecordsAccessor) *LibraryAccessor {
	return &LibraryAccessor{records: records}
}

// Unwrap returns the wrapped accessor.
func (l *LibraryAccessor) Unwrap() upstream.PullRecordsAccessor { return l.records }

func (l *LibraryAccessor) ListImagePullIntents() ([]*accessor.ImagePullIntent, error) {
	in, err := l.records.ListImagePullIntents()
	if in == nil {
		return nil, err
	}
	out := make([]*accessor.ImagePullIntent, len(in))
	for i, intent := range in {
		out[i] = &accessor.ImagePullIntent{Image: intent.Image}
	}
	return out, err
}

func (l *LibraryAccessor) ImagePullIntentExists(image string) (bool, error) {
	return l.records.ImagePullIntentExists(image)
}

func (l *LibraryAccessor) WriteImagePullIntent(logger klog.Logger, image string) error {
	return l.records.WriteImagePullIntent(logger, image)
}

func (l *LibraryAccessor) DeleteImagePullIntent(logger klog.Logger, image string) error {
	return l.records.DeleteImagePullIntent(logger, image)
}

func (l *LibraryAccessor) ListImagePulledRecords() ([]*accessor.ImagePulledRecord, error) {
	in, err := l.records.ListImagePulledRecords()
	if in == nil {
		return nil, err
	}
	out := make([]*accessor.ImagePulledRecord, len(in))
	for i, r := range in {
		out[i] = storageForm(RecordFromKubelet(r))
	}
	return out, err
}

func (l *LibraryAccessor) GetImagePulledRecord(imageRef string) (*accessor.ImagePulledRecord, bool, error) {
	r, exists, err := l.records.GetImagePulledRecord(imageRef)
	return storageForm(RecordFromKubelet(r)), exists, err
}

// storageForm sets r's time to its storage form, in place.
func storageForm(r *accessor.ImagePulledRecord) *accessor.ImagePulledRecord {
	if r != nil {
		r.LastUpdatedTime = accessor.StorageTime(r.LastUpdatedTime.Time)
	}
	return r
}

func (l *LibraryAccessor) WriteImagePulledRecord(logger klog.Logger, record *accessor.ImagePulledRecord) error {
	return l.records.WriteImagePulledRecord(logger, RecordToKubelet(record))
}

func (l *LibraryAccessor) DeleteImagePulledRecord(logger klog.Logger, imageRef string) error {
	return l.records.DeleteImagePulledRecord(logger, imageRef)
}
