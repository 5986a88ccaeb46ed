from django.urls import path

from datasets import views

urlpatterns = [
    path("datasets/", views.dataset_list, name="dataset-list"),
    path("datasets/new/", views.dataset_create, name="dataset-create"),
    path("datasets/<int:pk>/", views.dataset_detail, name="dataset-detail"),
]
