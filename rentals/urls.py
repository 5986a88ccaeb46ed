from django.urls import path

from rentals import views

urlpatterns = [
    path("rentals/", views.rental_list, name="rental-list"),
    path("rentals/new/", views.rental_create, name="rental-create"),
    path("rentals/<int:pk>/", views.rental_detail, name="rental-detail"),
    path("rentals/<int:pk>/decide/", views.rental_decide, name="rental-decide"),
    path("rentals/<int:pk>/cancel/", views.rental_cancel, name="rental-cancel"),
    path("rentals/<int:pk>/confirm/", views.rental_confirm, name="rental-confirm"),
]
